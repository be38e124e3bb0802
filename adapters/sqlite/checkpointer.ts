import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { threadRequirePath } from '../../src/config/index.js';
import type { FileIdentity } from './files.js';

/** How often the checkpointer copies what the WAL holds into the database file while there are writes. */
const CHECKPOINT_INTERVAL_MS = 200;

/**
 * The longest wait between two checkpoints of a store nobody writes: the wait doubles from
 * CHECKPOINT_INTERVAL_MS at each checkpoint that found nothing new, up to this. The store's
 * next write brings it back to CHECKPOINT_INTERVAL_MS at once (Checkpointer.written).
 */
const RESTING_INTERVAL_MS = 3200;

/**
 * The WAL size, in pages, past which the writing connection checkpoints by itself (SQLite's
 * wal_autocheckpoint): a safety net for a checkpointer that lags or stopped, far above what it
 * lets the WAL reach (about 40 MB).
 */
export const WRITER_CHECKPOINT_PAGES = 10_000;

/** The WAL file is cut back to this size when SQLite starts it over, after a burst made it grow. */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * Runs in the checkpointer's thread, as CommonJS (eval), so that the same text serves the sources
 * (tsx) and the build without a loader in the thread. It opens the database on a connection of
 * its own and runs a PASSIVE checkpoint every interval: it copies committed pages from the WAL
 * into the database file and syncs it, never waits for a lock and never blocks a reader or the
 * writer; a checkpoint that finds another one under way (a worker process's checkpointer) is
 * skipped. While nothing is written it waits longer each time (RESTING_INTERVAL_MS at most) and
 * says so ('resting'); the store's next write ('written') makes it checkpoint at once and return
 * to the short interval, so that an idle store costs a wake-up every few seconds, not five a
 * second, and a burst after a rest is not left to the writer's own checkpoints. Before each
 * checkpoint it checks that the files are still the ones opened and writable, with the store's
 * own check (files.ts, as threadRequirePath finds it): touching a memory-mapped -shm that became
 * immutable would be a SIGBUS for the whole process. When they are not, it stops, and the store
 * reports the loss.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const { changeOf, unwritableCode } = require(workerData.checks);
const { file, files, intervalMs, restingMs } = workerData;
const usable = () => files.every((each) => changeOf(each) === null && unwritableCode(each.path) === null);
let db = null;
let timer = null;
let stopped = false;
let waitMs = intervalMs;
let lastLog = -1;
let checkpoints = 0;
const stop = () => {
  stopped = true;
  clearTimeout(timer);
  if (db?.open) db.close();
  parentPort.close();
};
const schedule = (ms) => {
  clearTimeout(timer);
  if (!stopped) timer = setTimeout(checkpoint, ms);
};
const checkpoint = () => {
  if (!usable()) return stop();
  let idle = false;
  try {
    const [{ log, checkpointed }] = db.pragma('wal_checkpoint(PASSIVE)');
    checkpoints += 1;
    // Nothing new since the last one (every frame copied, as many as before): wait twice as long.
    idle = log === checkpointed && log === lastLog;
    lastLog = log;
  } catch {
    // SQLITE_BUSY (another checkpoint under way) or an error the store reports on its own statements.
  }
  const resting = idle && waitMs === intervalMs;
  waitMs = idle ? Math.min(waitMs * 2, restingMs) : intervalMs;
  if (resting) parentPort.postMessage('resting');
  schedule(waitMs);
};
parentPort.on('message', (message) => {
  if (message === 'written') {
    waitMs = intervalMs;
    schedule(0);
  } else if (message === 'stats') {
    parentPort.postMessage({ checkpoints, waitMs });
  } else {
    stop();
  }
});
if (usable()) {
  db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 0');
  schedule(intervalMs);
} else {
  stop();
}
`;

/**
 * Moves SQLite's checkpoints off the event loop. With WAL, the connection that commits also
 * checkpoints once the WAL holds wal_autocheckpoint pages (1,000 by default): it copies those pages
 * into the database file and syncs it, inside that commit, on the event loop, and under load that
 * was about 40% of the time the store spent writing. Here a thread with its own connection does
 * it; the writing connection keeps a far higher threshold (WRITER_CHECKPOINT_PAGES) as a safety net.
 */
export class Checkpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;
  /** The thread said it waits longer: the next write tells it (once). */
  private resting = false;
  private statsWaiters: ((stats: CheckpointerStats) => void)[] = [];

  constructor(
    file: string,
    files: readonly FileIdentity[],
    { intervalMs = CHECKPOINT_INTERVAL_MS, restingMs = RESTING_INTERVAL_MS } = {},
  ) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        checks: threadRequirePath(import.meta.url, 'files'),
        file,
        files,
        intervalMs,
        restingMs,
      },
      // Nothing of the process's own options (a loader, an inspector) is needed in this thread.
      execArgv: [],
    });
    // Its own errors only mean checkpoints stop; the writer's safety net still bounds the WAL.
    this.worker.on('error', () => undefined);
    this.worker.on('message', (message: 'resting' | CheckpointerStats) => {
      if (message === 'resting') this.resting = true;
      else for (const answer of this.statsWaiters.splice(0)) answer(message);
    });
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.unref();
  }

  /** After each write of the store's connection: a resting thread checkpoints at once and keeps the short interval. */
  written(): void {
    if (!this.resting) return;
    this.resting = false;
    this.worker.postMessage('written');
  }

  /** How many checkpoints the thread ran, and how long it waits now (for tests); null once it has ended. */
  stats(): Promise<CheckpointerStats | null> {
    const answer = new Promise<CheckpointerStats>((resolve) => {
      this.statsWaiters.push(resolve);
      this.worker.postMessage('stats');
    });
    return Promise.race([answer, this.exited.then(() => null)]);
  }

  /** Stops the thread and closes its connection (before the store closes its own). */
  async stop(): Promise<void> {
    this.worker.postMessage('stop');
    const forced = setTimeout(() => void this.worker.terminate(), 2000);
    await this.exited;
    clearTimeout(forced);
  }
}

export interface CheckpointerStats {
  checkpoints: number;
  waitMs: number;
}
