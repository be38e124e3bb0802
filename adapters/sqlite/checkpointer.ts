import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { threadRequirePath } from '../../src/config/index.js';
import type { FileIdentity } from './files.js';

/** How often the checkpointer copies what the WAL holds into the database file. */
const CHECKPOINT_INTERVAL_MS = 200;

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
 * skipped. Before each one it checks that the files are still the ones opened and writable, with
 * the store's own check (files.ts, as threadRequirePath finds it):
 * touching a memory-mapped -shm that became immutable would be a SIGBUS for the whole process.
 * When they are not, it stops, and the store reports the loss.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const { changeOf, unwritableCode } = require(workerData.checks);
const { file, files, intervalMs } = workerData;
const usable = () => files.every((each) => changeOf(each) === null && unwritableCode(each.path) === null);
let db = null;
let timer = null;
const stop = () => {
  if (timer) clearInterval(timer);
  timer = null;
  if (db?.open) db.close();
  parentPort.close();
};
parentPort.on('message', stop);
if (usable()) {
  db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 0');
  timer = setInterval(() => {
    if (!usable()) return stop();
    try {
      db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // SQLITE_BUSY (another checkpoint under way) or an error the store reports on its own statements.
    }
  }, intervalMs);
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

  constructor(file: string, files: readonly FileIdentity[]) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        checks: threadRequirePath(import.meta.url, 'files'),
        file,
        files,
        intervalMs: CHECKPOINT_INTERVAL_MS,
      },
      // Nothing of the process's own options (a loader, an inspector) is needed in this thread.
      execArgv: [],
    });
    // Its own errors only mean checkpoints stop; the writer's safety net still bounds the WAL.
    this.worker.on('error', () => undefined);
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.unref();
  }

  /** Stops the thread and closes its connection (before the store closes its own). */
  async stop(): Promise<void> {
    this.worker.postMessage('stop');
    const forced = setTimeout(() => void this.worker.terminate(), 2000);
    await this.exited;
    clearTimeout(forced);
  }
}
