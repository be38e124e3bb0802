/**
 * A unified diff of two texts by lines (Myers' O((N+M)·D) algorithm), as `diff -u` prints it:
 * the policy history shows what a version changed in a rule or a data payload.
 */

type Edit = { kind: ' ' | '-' | '+'; line: string };

/** Lines of context around each change, as `diff -u`. */
const CONTEXT = 3;

/** `diff -u` of `before` and `after` under the two labels; an empty string when they are equal. */
export function unifiedDiff(before: string, after: string, labels: { from: string; to: string }): string {
  if (before === after) return '';
  const edits = lineEdits(linesOf(before), linesOf(after));
  const hunks = hunksOf(edits);
  return [`--- ${labels.from}`, `+++ ${labels.to}`, ...hunks].join('\n') + '\n';
}

function linesOf(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/**
 * The edits turning `a` into `b`: the common first and last lines kept, the middle by Myers'
 * shortest edit script, or (when that would need more than MAX_TRACE_CELLS of memory) all of the
 * middle removed and added.
 */
function lineEdits(a: string[], b: string[]): Edit[] {
  let prefix = 0;
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix += 1;
  let suffix = 0;
  while (
    suffix < a.length - prefix &&
    suffix < b.length - prefix &&
    a[a.length - 1 - suffix] === b[b.length - 1 - suffix]
  )
    suffix += 1;
  const middleA = a.slice(prefix, a.length - suffix);
  const middleB = b.slice(prefix, b.length - suffix);
  const middle = shortestEdits(middleA, middleB) ?? [
    ...middleA.map((line): Edit => ({ kind: '-', line })),
    ...middleB.map((line): Edit => ({ kind: '+', line })),
  ];
  const kept = (lines: string[]) => lines.map((line): Edit => ({ kind: ' ', line }));
  return [...kept(a.slice(0, prefix)), ...middle, ...kept(a.slice(a.length - suffix))];
}

/** Memory bound of the search: a frontier is kept per edit distance. */
const MAX_TRACE_CELLS = 4_000_000;

/** Myers' shortest edit script; null when it would take more than MAX_TRACE_CELLS. */
function shortestEdits(a: string[], b: string[]): Edit[] | null {
  const max = a.length + b.length;
  const offset = max + 1;
  let frontier = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d += 1) {
    if ((d + 1) * frontier.length > MAX_TRACE_CELLS) return null;
    trace.push(frontier);
    frontier = frontier.slice();
    for (let k = -d; k <= d; k += 2) {
      // Diagonals -d-1…d+1 lie within the frontier: offset is one more than the largest d.
      const down = k === -d || (k !== d && frontier[offset + k - 1]! < frontier[offset + k + 1]!);
      let x = down ? frontier[offset + k + 1]! : frontier[offset + k - 1]! + 1;
      let y = x - k;
      while (x < a.length && y < b.length && a[x] === b[y]) {
        x += 1;
        y += 1;
      }
      frontier[offset + k] = x;
      if (x >= a.length && y >= b.length) return backtrack(trace, a, b, offset);
    }
  }
  return backtrack(trace, a, b, offset);
}

function backtrack(trace: Int32Array[], a: string[], b: string[], offset: number): Edit[] {
  const edits: Edit[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = trace.length - 1; d >= 0; d -= 1) {
    const frontier = trace[d]!;
    const k = x - y;
    const down = k === -d || (k !== d && frontier[offset + k - 1]! < frontier[offset + k + 1]!);
    const previousK = down ? k + 1 : k - 1;
    const previousX = d === 0 ? 0 : frontier[offset + previousK]!;
    const previousY = previousX - previousK;
    while (x > previousX && y > previousY) {
      edits.push({ kind: ' ', line: a[x - 1]! });
      x -= 1;
      y -= 1;
    }
    if (d === 0) break;
    if (down) edits.push({ kind: '+', line: b[y - 1]! });
    else edits.push({ kind: '-', line: a[x - 1]! });
    x = previousX;
    y = previousY;
  }
  return edits.reverse();
}

/** Groups the edits into hunks with CONTEXT lines around each change, `@@ -l,s +l,s @@` headed. */
function hunksOf(edits: Edit[]): string[] {
  const changed = edits.flatMap((edit, index) => (edit.kind === ' ' ? [] : [index]));
  const lines: string[] = [];
  let index = 0;
  while (index < changed.length) {
    const start = Math.max(0, changed[index]! - CONTEXT);
    let end = changed[index]!;
    while (index + 1 < changed.length && changed[index + 1]! - end <= 2 * CONTEXT) end = changed[++index]!;
    end = Math.min(edits.length - 1, end + CONTEXT);
    index += 1;
    const before = edits.slice(0, start);
    const fromStart = before.filter((edit) => edit.kind !== '+').length + 1;
    const toStart = before.filter((edit) => edit.kind !== '-').length + 1;
    const hunk = edits.slice(start, end + 1);
    const fromCount = hunk.filter((edit) => edit.kind !== '+').length;
    const toCount = hunk.filter((edit) => edit.kind !== '-').length;
    lines.push(`@@ -${range(fromStart, fromCount)} +${range(toStart, toCount)} @@`);
    lines.push(...hunk.map((edit) => `${edit.kind}${edit.line}`));
  }
  return lines;
}

/** `diff -u`'s range: an empty side starts one line earlier. */
function range(start: number, count: number): string {
  return count === 0 ? `${start - 1},0` : count === 1 ? `${start}` : `${start},${count}`;
}
