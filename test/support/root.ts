import { appendFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { buildConsole } from '../../scripts/build-console.js';
import { projectPath, runThreadsCompiled } from '../../src/config/index.js';
import { compiledIsFresh } from './entry-point.js';
import { scratchInMemory } from './scratch.js';
import { closeSharedFixtures } from './server.js';

// Mocha's root-hook plugin (`require` in .mocharc.json and test/mocharc-*.cjs): what runs once
// around the test files of one process. Under `--parallel` (the first pass of `npm test`) each
// worker is a process of its own that runs many files one after another, so the shared servers,
// clusters and Chromium (sharedFixture) are per worker by construction, made on first use and
// closed when the pool ends the worker, not after each file (mocha runs a plugin's `afterAll`
// after every file in a worker). Node's require(esm) gives the plugin the same copy of
// test/support as the test files.

// Mocha requires this plugin as it requires the test files, so both share one copy of each module.
// Were anything in its graph not requirable (a top-level await), mocha would import it as an ES
// module instead, with copies of its own: the threads' choice below and the shared fixtures it
// closes would then be where no test file sees them (fixtures left running after the run).
if (typeof module === 'undefined')
  throw new Error('test/support/root.ts was loaded as an ES module, not required: see the comment above this line');

// The policy threads of every test server load the build's modules when dist/ is as new as the
// sources (`npm test` builds it first): under tsx each thread transforms its modules as it starts.
if (compiledIsFresh()) runThreadsCompiled(projectPath('dist', 'src'));

// Before any worker starts: they, and everything the tests start, inherit TMPDIR (scratch.ts).
scratchInMemory();

/** Mocha sets this in the environment of each `--parallel` worker it starts. */
const inWorker = process.env.MOCHA_WORKER_ID !== undefined;

/** How long a worker's shared fixtures may take to close once the pool ends it. */
const WORKER_CLOSE_MS = 60_000;

/**
 * The server serves the console `npm run build` wrote (dist/console/): built here from the
 * sources under test, so that a run of single test files never serves a missing or stale one;
 * skipped when dist/ is as new as the sources (`npm test` builds it before mocha).
 */
async function consoleOfTheSources(): Promise<void> {
  if (!compiledIsFresh()) await buildConsole();
}

/**
 * In a worker: closes its shared fixtures when the pool ends it. The pool sends SIGTERM after one
 * second, which would leave the PostgreSQL clusters, FerretDB, OPA and Chromium of this worker
 * running; it is ignored while they close, within WORKER_CLOSE_MS.
 */
function closeFixturesWhenTheWorkerEnds(): void {
  const workerpool = createRequire(import.meta.url)('workerpool') as {
    worker(methods: object, options: { onTerminate: () => Promise<void> }): void;
  };
  workerpool.worker(
    {},
    {
      onTerminate: async () => {
        process.on('SIGTERM', () => undefined);
        const deadline = new Promise<void>((resolve) => setTimeout(resolve, WORKER_CLOSE_MS).unref());
        await Promise.race([closeSharedFixtures(), deadline]);
      },
    },
  );
}

if (inWorker) closeFixturesWhenTheWorkerEnds();

/**
 * TEST_CPU_LOG=<file>: one JSON line per test file with the CPU it used (this process's threads,
 * and the child processes that ended meanwhile: OPA, server and CLI processes), for ranking
 * where the suite's CPU goes (docs/development.md "Measuring a run"). A shared server's CPU
 * counts to the files that run while it lives.
 */
function cpuPerFile(out: string): { beforeAll: Mocha.Func[]; afterAll: Mocha.Func[] } {
  let started = { at: 0, cpu: 0 };
  const sample = () => ({ at: Date.now(), cpu: cpuMsSoFar() });
  return {
    beforeAll: [
      () => {
        started = sample();
      },
    ],
    afterAll: [
      function (this: Mocha.Context) {
        const now = sample();
        const file = this.test?.parent?.suites[0]?.file ?? '?';
        mkdirSync(dirname(out), { recursive: true });
        appendFileSync(
          out,
          `${JSON.stringify({
            file,
            cpuMs: Math.round(now.cpu - started.cpu),
            wallMs: now.at - started.at,
            // Which worker ran it and when it began: the pass's timeline (which worker ends last, and why).
            worker: process.pid,
            startedAt: started.at,
          })}\n`,
        );
      },
    ],
  };
}

/** This process's CPU and that of the children it reaped, in ms: the timing reporter's measure. */
const { cpuMsSoFar } = createRequire(import.meta.url)('./timing-reporter.cjs') as { cpuMsSoFar(): number };

const cpuLog = process.env.TEST_CPU_LOG ? cpuPerFile(process.env.TEST_CPU_LOG) : { beforeAll: [], afterAll: [] };

export const mochaHooks = inWorker ? cpuLog : { ...cpuLog, afterAll: [...cpuLog.afterAll, closeSharedFixtures] };

/** Runs once in mocha's main process, before any worker starts: one console build, never two at once. */
export const mochaGlobalSetup = consoleOfTheSources;

// Loaded as a spec file instead (`mocha --no-config … test/support/root.ts <files…>`, as before
// the plugin): mocha's globals exist while it loads its spec files, so the same hooks are
// registered as root-level hooks. Loaded as the plugin first, this module is not evaluated again.
if (typeof globalThis.before === 'function') {
  before(consoleOfTheSources);
  after(closeSharedFixtures);
}
