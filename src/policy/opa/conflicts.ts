/**
 * OPA names one place of an `eval_conflict_error`: one of the definitions that disagree, not
 * necessarily the one just written. This names them all, so that an operator sees both sides:
 * `… (arbiter/token/token.rego:20); data.arbiter.token.decision is defined at
 * arbiter/token/token.rego:20, arbiter/token2.rego:3`. Rule heads are found as `opa fmt` writes
 * them: at the start of a line, in every Rego file of the same package.
 */

interface RegoFile {
  kind: string;
  path: string;
  content: string;
}

const CONFLICT = /eval_conflict_error: [^()]*\(([^():\s]+):(\d+)\)/g;

/** The message with the definitions of each conflicting rule it names added; unchanged when there is nothing to add. */
export function withConflictingDefinitions(message: string, files: readonly RegoFile[]): string {
  const additions = new Set<string>();
  for (const [, file, row] of message.matchAll(CONFLICT)) {
    const found = definitionsAt(files, file!, Number(row));
    if (found && found.places.length > 1) additions.add(`data.${found.rule} is defined at ${found.places.join(', ')}`);
  }
  return additions.size ? `${message}; ${[...additions].join('; ')}` : message;
}

function definitionsAt(
  files: readonly RegoFile[],
  path: string,
  row: number,
): { rule: string; places: string[] } | null {
  const file = files.find((candidate) => candidate.kind === 'rego' && candidate.path === path);
  const name = file && ruleAt(file.content.split('\n'), row);
  const pkg = file && packageOf(file.content);
  if (!name || !pkg) return null;
  const head = new RegExp(`^${name}(?=\\s*(?::=|=|\\[|\\{|\\(|if\\b|contains\\b)|\\s*$)`);
  const places = files
    .filter((candidate) => candidate.kind === 'rego' && packageOf(candidate.content) === pkg)
    .flatMap((candidate) =>
      candidate.content
        .split('\n')
        .flatMap((line, index) => (head.test(line) ? [`${candidate.path}:${index + 1}`] : [])),
    );
  return { rule: `${pkg}.${name}`, places };
}

/** The rule whose head is at `row` or above it (OPA may point at an `} else :=` line of the rule). */
function ruleAt(lines: string[], row: number): string | null {
  for (let index = Math.min(row, lines.length) - 1; index >= 0; index -= 1) {
    const name = /^(?:default\s+)?([A-Za-z_]\w*)/.exec(lines[index]!)?.[1];
    if (name === 'package' || name === 'import') return null;
    if (name) return name;
  }
  return null;
}

function packageOf(content: string): string | null {
  return /^\s*package\s+([\w.]+)/m.exec(content)?.[1] ?? null;
}
