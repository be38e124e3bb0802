/**
 * Counts the console and the Admin API report about the service (the overview's activity, the
 * shadow policy's evaluations and differences) must read the same from every worker and node, and
 * survive a restart. Each process counts its own share in memory, as today, and writes it to the
 * store as documents of its own (their ids carry PROCESS_ID) at most once a second, off the
 * request's path; a reader sums the shares of every process. A restarted process writes new
 * shares beside the old ones, which keep counting until they expire.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log/index.js';
import {
  DEFAULT_TENANT,
  type CollectionSpec,
  type Filter,
  type FindOptions,
  type StoredDoc,
  type Store,
} from './types.js';

/** This process among every worker and node sharing the store. */
export const PROCESS_ID = randomUUID();

/** How often a process writes the shares that changed. */
const FLUSH_INTERVAL_MS = 1000;

export class ProcessShares<T extends StoredDoc> {
  /** Shares changed since the last flush: their id → how to build the document now. */
  private readonly changed = new Map<string | number, () => T>();
  private flushing: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;
  private failing = false;

  constructor(
    private readonly store: Store,
    private readonly spec: CollectionSpec,
    private readonly log?: Logger,
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
    // Declared now, at start: an embedded store makes the table before it serves, not at a first
    // write that may meet another connection's lock (SQLite waits for it on the event loop).
    try {
      this.collection();
    } catch {
      // The store cannot make it now: it is made at the first write instead.
    }
  }

  /** This process's share `id` changed; `build` gives its document when it is next written. */
  changedShare(id: string | number, build: () => T): void {
    this.changed.set(id, build);
  }

  /** Writes the shares changed so far; resolves once they are stored (a failure is logged and retried later). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.changed.size === 0) return;
    const batch = [...this.changed];
    this.changed.clear();
    this.flushing = this.write(batch).finally(() => (this.flushing = null));
    await this.flushing;
  }

  /** Every process's shares matching `filter` (this process's own written first, so they are current). */
  async read(filter: Filter, options?: FindOptions): Promise<T[]> {
    await this.flush();
    return this.collection().find(filter, options);
  }

  /** Removes every process's shares matching `filter` (counts that start afresh). */
  async remove(filter: Filter): Promise<void> {
    for (const [id, build] of this.changed) if (matches(build(), filter)) this.changed.delete(id);
    await this.collection().deleteMany(filter);
  }

  /** Stops the periodic writes and writes what is left: for a stopping server, before its store closes. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush().catch(() => undefined);
  }

  private async write(batch: [string | number, () => T][]): Promise<void> {
    for (const [id, build] of batch) {
      try {
        // Inside the try: a store that cannot make the table now (another connection's lock)
        // throws here, and the timer's flush awaits nothing (found 2026-11-29: an unhandled
        // rejection, which ends the process, and the batch lost).
        await this.collection().upsert(build());
        this.failing = false;
      } catch (error) {
        // Kept for the next flush, unless a newer state of the share is waiting already.
        if (!this.changed.has(id)) this.changed.set(id, build);
        if (!this.failing)
          this.log?.warn({ err: error, collection: this.spec.name }, 'shared counts not written; retried');
        this.failing = true;
      }
    }
  }

  private collection() {
    return this.store.collection<T>(this.spec, DEFAULT_TENANT);
  }
}

function matches(doc: StoredDoc, filter: Filter): boolean {
  return Object.entries(filter).every(([field, value]) => (doc[field] ?? null) === value);
}
