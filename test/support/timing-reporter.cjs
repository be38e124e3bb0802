// A mocha reporter for finding where the suite's time goes: mocha's dot reporter on the terminal,
// and one JSON line per top-level suite (its wall time, hooks included), per test and per hook
// over 300 ms, appended to test-artifacts/timings.jsonl as they end (so a long run can be read
// while it goes on, and what ran before a stop is kept). `scripts/test-timings.ts` sums it up.
// Where the tests run in the reporter's process (the serial pass, single files: not `--parallel`),
// a suite's line also has `cpuMs`: this process's CPU (user + system) while it ran, plus that of
// the child processes it reaped meanwhile (spawned servers, the CLI, OPA: /proc's cutime + cstime),
// so files can be ranked by CPU, not only by wall.
//   bash scripts/run.sh mocha --reporter test/support/timing-reporter.cjs [files…]
// (`--reporter-option out=<file>` writes elsewhere.) CommonJS: mocha loads reporters with require.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS module, for mocha's require */
const { appendFileSync, mkdirSync, readFileSync } = require('node:fs');
const process = require('node:process');
const { dirname } = require('node:path');
const Mocha = require('mocha');

const { EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_HOOK_BEGIN, EVENT_HOOK_END, EVENT_TEST_PASS, EVENT_TEST_FAIL } =
  Mocha.Runner.constants;

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU milliseconds used so far by this process and by the children it has waited for. */
function cpuMsSoFar() {
  const own = process.cpuUsage();
  // After the command's closing parenthesis: field 3 is the state, so cutime and cstime (fields 16, 17) are at 13 and 14.
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const childTicks = Number(fields[13]) + Number(fields[14]);
  return (own.user + own.system) / 1000 + (childTicks * 1000) / TICKS_PER_SECOND;
}

class TimingReporter extends Mocha.reporters.Dot {
  constructor(runner, options) {
    super(runner, options);
    const out = options.reporterOption?.out ?? options.reporterOptions?.out ?? 'test-artifacts/timings.jsonl';
    mkdirSync(dirname(out), { recursive: true });
    const write = (entry) => appendFileSync(out, `${JSON.stringify({ ...entry, at: new Date().toISOString() })}\n`);
    const started = new Map();
    // Under --parallel the tests run in worker processes: this one's CPU says nothing of them.
    const cpuHere = !options.parallel && process.platform === 'linux';
    const cpuAtStart = new Map();
    // A file's top-level suites, hooks included: its share of the run.
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (!suite.file || !suite.parent?.root) return;
      started.set(suite, Date.now());
      if (cpuHere) cpuAtStart.set(suite, cpuMsSoFar());
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      if (!started.has(suite)) return;
      const cpu = cpuHere ? { cpuMs: Math.round(cpuMsSoFar() - cpuAtStart.get(suite)) } : {};
      write({ kind: 'suite', file: suite.file, title: suite.title, ms: Date.now() - started.get(suite), ...cpu });
    });
    runner.on(EVENT_HOOK_BEGIN, (hook) => started.set(hook, Date.now()));
    runner.on(EVENT_HOOK_END, (hook) => {
      const ms = Date.now() - started.get(hook);
      started.delete(hook);
      if (ms > 300) write({ kind: 'hook', file: hook.file ?? hook.parent?.file, title: hook.fullTitle(), ms });
    });
    const test = (state) => (each) =>
      write({ kind: 'test', file: each.file, title: each.fullTitle(), ms: each.duration ?? 0, state });
    runner.on(EVENT_TEST_PASS, test('passed'));
    runner.on(EVENT_TEST_FAIL, test('failed'));
  }
}

module.exports = TimingReporter;
// The same measure for test/support/root.ts (TEST_CPU_LOG, per file of a parallel worker).
module.exports.cpuMsSoFar = cpuMsSoFar;
