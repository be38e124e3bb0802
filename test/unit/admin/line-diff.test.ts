import { expect } from 'chai';
import fc from 'fast-check';
import { unifiedDiff } from '../../../src/admin/line-diff.js';

const labels = { from: 'a (version 1)', to: 'a (current)' };

/** Applies a unified diff to `before` (what `patch` would do), to check that the diff says exactly what changed. */
function applied(before: string, diff: string): string {
  if (diff === '') return before;
  const source = before === '' ? [] : before.replace(/\n$/, '').split('\n');
  const result: string[] = [];
  let next = 0;
  for (const line of diff.replace(/\n$/, '').split('\n').slice(2)) {
    const hunk = /^@@ -(\d+)(?:,(\d+))? /.exec(line);
    if (hunk) {
      const start = Number(hunk[1]) - (hunk[2] === '0' ? 0 : 1);
      while (next < start) result.push(source[next++]!);
    } else if (line.startsWith(' ')) {
      expect(source[next], 'a kept line is the source line').to.equal(line.slice(1));
      result.push(source[next++]!);
    } else if (line.startsWith('-')) {
      expect(source[next], 'a removed line is the source line').to.equal(line.slice(1));
      next += 1;
    } else result.push(line.slice(1));
  }
  while (next < source.length) result.push(source[next++]!);
  return result.length ? `${result.join('\n')}\n` : '';
}

describe('unit: unifiedDiff, the policy history diff (admin/line-diff)', function () {
  it('prints what diff -u prints for a changed line in context', function () {
    const before = 'package a\n\nanswer := 1\n\nx := 1\ny := 2\nz := 3\nw := 4\n';
    const after = 'package a\n\nanswer := 2\n\nx := 1\ny := 2\nz := 3\nw := 4\n';
    expect(unifiedDiff(before, after, labels)).to.equal(
      '--- a (version 1)\n+++ a (current)\n@@ -1,6 +1,6 @@\n package a\n \n-answer := 1\n+answer := 2\n \n x := 1\n y := 2\n',
    );
  });

  it('is empty for equal texts, and all added or all removed against nothing', function () {
    expect(unifiedDiff('a\n', 'a\n', labels)).to.equal('');
    expect(unifiedDiff('', 'a\nb\n', labels)).to.equal('--- a (version 1)\n+++ a (current)\n@@ -0,0 +1,2 @@\n+a\n+b\n');
    expect(unifiedDiff('a\n', '', labels)).to.equal('--- a (version 1)\n+++ a (current)\n@@ -1 +0,0 @@\n-a\n');
  });

  it('turns any text into any other when applied (property)', function () {
    const text = fc
      .array(fc.constantFrom('a', 'b', 'c', 'd', ''), { maxLength: 40 })
      .map((lines) => (lines.length ? `${lines.join('\n')}\n` : ''));
    fc.assert(
      fc.property(text, text, (before, after) => {
        expect(applied(before, unifiedDiff(before, after, labels))).to.equal(after);
      }),
      { numRuns: 300 },
    );
  });
});
