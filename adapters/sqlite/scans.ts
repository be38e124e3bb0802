import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { StoreUnavailableError } from '../../src/store/index.js';

/** Scans waiting for the thread at once; one more is refused as busy (a 503), not queued without end. */
export const MAX_WAITING_SCANS = 8;

/** A scan that has not answered by then is given up (a 503) and its thread replaced. */
export const SCAN_TIMEOUT_MS = 10_000;

type Params = Record<string, unknown>;

/**
 * Runs in the scan thread, as CommonJS (eval), like the checkpointer's: a read-only connection of
 * its own answers one statement at a time.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { readonly: true, fileMustExist: true });
db.pragma('busy_timeout = ' + workerData.lockWaitMs);
const statements = new Map();
parentPort.on('message', ({ id, sql, params, one }) => {
  if (id === undefined) {
    db.close();
    parentPort.close();
    return;
  }
  try {
    let statement = statements.get(sql);
    if (!statement) {
      if (statements.size >= 64) statements.clear();
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    parentPort.postMessage({ id, result: one ? statement.get(params) : statement.all(params) });
  } catch (error) {
    parentPort.postMessage({ id, error: { code: String(error.code ?? ''), message: String(error.message) } });
  }
});
`;

interface Waiting {
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * Reads whose cost grows with the collection, not with the answer (a search of the Admin API
 * reads every record of the tenant: 406 ms for 300,000 subjects), run on a connection in a thread
 * of their own: better-sqlite3 is synchronous, so on the store's connection such a read held every
 * request of the process, and a read-only key could repeat it. The thread starts with the first
 * scan; a read there sees every write committed before it was sent (WAL), so a process reads its
 * own writes. At most MAX_WAITING_SCANS wait, each at most SCAN_TIMEOUT_MS.
 */
export class ScanThread {
  private worker: Worker | null = null;
  private nextId = 0;
  private readonly waiting = new Map<number, Waiting>();

  constructor(
    private readonly file: string,
    private readonly lockWaitMs: number,
    /** Maps a SQLite error code and message to the error the store throws (an unusable file: StoreUnavailableError). */
    private readonly failure: (code: string, message: string) => Error,
  ) {}

  all<R>(sql: string, params: Params): Promise<R[]> {
    return this.run(sql, params, false) as Promise<R[]>;
  }

  get<R>(sql: string, params: Params): Promise<R> {
    return this.run(sql, params, true) as Promise<R>;
  }

  async stop(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    this.failAll(new StoreUnavailableError('the store is closing; the search was not finished'));
    if (!worker) return;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.postMessage({});
    const forced = setTimeout(() => void worker.terminate(), 2000);
    await exited;
    clearTimeout(forced);
  }

  private run(sql: string, params: Params, one: boolean): Promise<unknown> {
    if (this.waiting.size >= MAX_WAITING_SCANS)
      return Promise.reject(
        new StoreUnavailableError(`${MAX_WAITING_SCANS} searches of the store wait already; try again shortly`),
      );
    const worker = this.started();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.timedOut(id), SCAN_TIMEOUT_MS);
      this.waiting.set(id, { resolve, reject, timer });
      worker.postMessage({ id, sql, params, one });
    });
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        file: this.file,
        lockWaitMs: this.lockWaitMs,
      },
      // Nothing of the process's own options (a loader, an inspector) is needed in this thread.
      execArgv: [],
    });
    worker.on(
      'message',
      ({ id, result, error }: { id: number; result?: unknown; error?: { code: string; message: string } }) => {
        const waiting = this.waiting.get(id);
        if (!waiting) return;
        this.waiting.delete(id);
        clearTimeout(waiting.timer);
        if (error) waiting.reject(this.failure(error.code, error.message));
        else waiting.resolve(result);
      },
    );
    const ended = (reason: string) => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.failAll(new StoreUnavailableError(`the store's search thread ended (${reason}); try again`));
    };
    worker.on('error', (error) => ended(error.message));
    worker.on('exit', (code) => ended(`exit code ${code}`));
    worker.unref();
    this.worker = worker;
    return worker;
  }

  /** A scan past its time: its caller gets a 503, and the thread (still reading) is replaced by a new one. */
  private timedOut(id: number): void {
    if (!this.waiting.has(id)) return;
    const worker = this.worker;
    this.worker = null;
    this.failAll(
      new StoreUnavailableError(`a search of the store took more than ${SCAN_TIMEOUT_MS} ms; it was stopped`),
    );
    void worker?.terminate();
  }

  private failAll(error: Error): void {
    for (const waiting of this.waiting.values()) {
      clearTimeout(waiting.timer);
      waiting.reject(error);
    }
    this.waiting.clear();
  }
}
