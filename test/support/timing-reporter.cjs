// A mocha reporter for finding where the suite's time goes: mocha's dot reporter on the terminal,
// and one JSON line per top-level suite (its wall time, hooks included), per test and per hook
// over 300 ms, appended to test-artifacts/timings.jsonl as they end (so a long run can be read
// while it goes on, and what ran before a stop is kept). `scripts/test-timings.ts` sums it up.
//   bash scripts/run.sh mocha --reporter test/support/timing-reporter.cjs [files…]
// (`--reporter-option out=<file>` writes elsewhere.) CommonJS: mocha loads reporters with require.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS module, for mocha's require */
const { appendFileSync, mkdirSync } = require('node:fs');
const { dirname } = require('node:path');
const Mocha = require('mocha');

const { EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_HOOK_BEGIN, EVENT_HOOK_END, EVENT_TEST_PASS, EVENT_TEST_FAIL } =
  Mocha.Runner.constants;

class TimingReporter extends Mocha.reporters.Dot {
  constructor(runner, options) {
    super(runner, options);
    const out = options.reporterOption?.out ?? options.reporterOptions?.out ?? 'test-artifacts/timings.jsonl';
    mkdirSync(dirname(out), { recursive: true });
    const write = (entry) => appendFileSync(out, `${JSON.stringify({ ...entry, at: new Date().toISOString() })}\n`);
    const started = new Map();
    // A file's top-level suites, hooks included: its share of the run.
    runner.on(EVENT_SUITE_BEGIN, (suite) => suite.file && suite.parent?.root && started.set(suite, Date.now()));
    runner.on(EVENT_SUITE_END, (suite) => {
      if (started.has(suite))
        write({ kind: 'suite', file: suite.file, title: suite.title, ms: Date.now() - started.get(suite) });
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
