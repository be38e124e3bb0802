/**
 * `bash scripts/run.sh tsx scripts/test-timings.ts [file.jsonl] [count]`: where a mocha run's time
 * went, from what test/support/timing-reporter.cjs wrote (default test-artifacts/timings.jsonl):
 * the files, tests and hooks that took longest, and the sum. The machine is shared: read shares,
 * not seconds.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface Entry {
  kind: 'suite' | 'test' | 'hook';
  file?: string;
  title: string;
  ms: number;
  state?: string;
}

const [path = 'test-artifacts/timings.jsonl', count = '20'] = process.argv.slice(2);
const entries = readFileSync(path, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => JSON.parse(line) as Entry);
const top = Number(count);
const where = (entry: Entry) => (entry.file ? relative(process.cwd(), entry.file) : '(root)');
const seconds = (ms: number) => `${(ms / 1000).toFixed(1).padStart(7)} s`;

const perFile = new Map<string, number>();
for (const entry of entries.filter(({ kind }) => kind === 'suite'))
  perFile.set(where(entry), (perFile.get(where(entry)) ?? 0) + entry.ms);
const total = [...perFile.values()].reduce((sum, ms) => sum + ms, 0);
console.log(`${perFile.size} files, ${seconds(total).trim()} in all`);
for (const [file, ms] of [...perFile].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${seconds(ms)} ${((100 * ms) / total).toFixed(1).padStart(5)} %  ${file}`);

for (const kind of ['test', 'hook'] as const) {
  console.log(`\nslowest ${kind}s`);
  for (const entry of entries
    .filter((each) => each.kind === kind)
    .sort((a, b) => b.ms - a.ms)
    .slice(0, top))
    console.log(`${seconds(entry.ms)}  ${where(entry)}: ${entry.title}${entry.state === 'failed' ? ' (FAILED)' : ''}`);
}
