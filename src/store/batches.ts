import type { Store, WindowCount } from './types.js';

/** What a batch writer is told: how to write a batch, and how many items one may hold. */
export interface BatchOptions<T, R> {
  /** Writes the items in one go; resolves with one result per item, in their order. */
  write(items: T[]): Promise<R[]>;
  /** A batch this full is written at once. */
  maxItems: number;
  /** Told once per failed batch, before each of its items is rejected with the error. */
  onFailure(error: unknown, items: number): void;
}

interface Waiter<T, R> {
  item: T;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/**
 * Gathers items written by concurrent callers into batches, one write per batch, and tells each
 * caller when its item is written (or why not). Used by the audit log (one insert of the
 * entries of one turn) and by the SQLite store (one transaction for the writes of one turn). Batches are written one after the other, in the
 * order their items came, so a batch may rely on the previous one having finished. Items that
 * come while a batch is being written (MongoDB: a round trip) form the next one, which starts as
 * soon as that write ends.
 */
export class BatchWriter<T, R> {
  private queue: Waiter<T, R>[] = [];
  /** Cancels the scheduled start of the next batch; null when none is scheduled. */
  private cancelScheduled: (() => void) | null = null;
  private writing: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly options: BatchOptions<T, R>) {}

  /** Resolves once the batch holding this item is written; rejects with the batch's error otherwise. */
  add(item: T): Promise<R> {
    if (this.closed) return Promise.reject(new Error('this batch writer is closed (the server is stopping)'));
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.queue.length >= this.options.maxItems) this.startBatch();
      else this.schedule();
    });
  }

  /** Writes everything added so far, and resolves once it is written (or has failed). */
  async flush(): Promise<void> {
    while (this.queue.length > 0 || this.writing) {
      this.startBatch();
      await this.writing;
    }
  }

  /** Refuses new items, then flushes. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
  }

  /** The next turn of the event loop: the items of every request finished in this turn share one write. */
  private schedule(): void {
    if (this.cancelScheduled) return;
    const immediate = setImmediate(() => this.startBatch());
    this.cancelScheduled = () => clearImmediate(immediate);
  }

  private startBatch(): void {
    this.cancelScheduled?.();
    this.cancelScheduled = null;
    if (this.writing || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.options.maxItems);
    this.writing = this.writeBatch(batch).finally(() => {
      this.writing = null;
      // What came meanwhile has waited for this write already.
      if (this.queue.length > 0) this.startBatch();
    });
  }

  /** Never rejects: the outcome goes to each item's caller. */
  private async writeBatch(batch: Waiter<T, R>[]): Promise<void> {
    try {
      const results = await this.options.write(batch.map((waiter) => waiter.item));
      batch.forEach((waiter, index) => waiter.resolve(results[index]!)); // one result per item, in order
    } catch (error) {
      this.options.onFailure(error, batch.length);
      for (const waiter of batch) waiter.reject(error);
    }
  }
}

/** How many callers' keys one readWindows of windowsReadByTurn carries at most. */
const WINDOW_READS_PER_BATCH = 256;

/**
 * The store's window counters, with the readWindows of one event-loop turn made as one: every
 * request that presents a client's credentials reads that client's failure counters
 * (src/http/auth-failures.ts), and the requests of one turn, of as many tenants, would each make a
 * statement (or a round trip) of their own. Each caller is answered the counts of every key of its
 * batch, its own among them, read once the turn's callers have asked: no older than a read of its own.
 */
export function windowsReadByTurn(
  store: Pick<Store, 'addToWindow' | 'readWindows'>,
): Pick<Store, 'addToWindow' | 'readWindows'> {
  const reads = new BatchWriter<readonly string[], Map<string, WindowCount>>({
    write: async (asked) => {
      const counts = await store.readWindows([...new Set(asked.flat())]);
      return asked.map(() => counts);
    },
    maxItems: WINDOW_READS_PER_BATCH,
    onFailure: () => {},
  });
  return {
    addToWindow: (key, windowMs, amount) => store.addToWindow(key, windowMs, amount),
    readWindows: (keys) => reads.add(keys),
  };
}
