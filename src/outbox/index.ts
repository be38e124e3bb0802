import { randomUUID } from 'node:crypto';
import type { Logger } from '../log/index.js';
import { ConflictError, DEFAULT_TENANT, PROCESS_ID, type Store, type StoredDoc } from '../store/index.js';

/**
 * A durable outbox: what must reach someone outside (a Security Event Token to a receiver, later
 * a back-channel logout that failed) is written to the store before the change that causes it is
 * acknowledged, then delivered by one node at a time (a lease in the store), at least once, in
 * order per stream, with retries and back-off. Nothing of it lives only in one node's memory: a
 * node that dies mid-delivery leaves its entries to the next lease holder.
 *
 * The store interface has no transaction across collections, so "with the change" means: the
 * caller writes the change, then appends here, then answers. A crash between the two leaves a
 * change whose caller was never answered (it retries); a crash after the append leaves an entry
 * that is delivered after the restart. Entries are delivered at least once: a handler must be
 * idempotent, or its receiver must tell duplicates apart (a SET's `jti`).
 */
export const OUTBOX_COLLECTION = {
  name: 'outbox',
  indexes: [
    ['topic', 'id'],
    ['stream', 'id'],
  ],
};
/** One lease document per topic: which process delivers it, and until when. */
export const OUTBOX_LEASES_COLLECTION = { name: 'outbox_leases' };

export interface OutboxEntry extends StoredDoc {
  /** A store sequence: the order of appends, across every node. */
  id: number;
  /** Which handler delivers it (`ssf`, `backchannel-logout`, …). */
  topic: string;
  /** The ordering key: entries of one stream are delivered one after the other, never past a failed one. */
  stream: string;
  payload: unknown;
  createdAt: number;
  attempts: number;
  /** Not before this instant (epoch ms): the back-off after a failed attempt. */
  notBefore: number;
  /** The last failure, for the Admin API (a reason, never a secret). */
  lastError?: string;
}

interface LeaseDoc extends StoredDoc {
  id: string;
  holder: string;
  until: number;
}

/** Delivers one entry; throws to have it tried again later. */
export type OutboxHandler = (entry: OutboxEntry) => Promise<void>;

/** How a topic's entries are delivered, beyond its handler. */
export interface TopicOptions {
  /**
   * An entry older than this (ms since its append) is given up instead of tried again: counted
   * (`givenUp`), logged, and dropped, so that it holds its stream up no longer. Absent: never.
   */
  maxAgeMs?: number;
}

export interface OutboxOptions {
  /** How often a node looks for work (and for the lease) when nothing woke it. */
  pollMs: number;
  /** How long a lease lasts without being renewed: the longest a dead holder delays delivery. */
  leaseMs: number;
  /** The first retry's delay; each next one doubles, up to `maxBackoffMs`. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Entries read per round. */
  batch: number;
}

/** What /metrics and the Admin API show of an outbox. */
export interface OutboxState {
  pending: number;
  /** Of the oldest pending entry, in seconds (0 when none). */
  lagSeconds: number;
  /** Pending entries that failed at least once. */
  failing: number;
  delivered: number;
  failures: number;
  /** Entries this node dropped past their topic's `maxAgeMs` since it started. */
  givenUp: number;
  /** Whether this process holds a lease now. */
  leader: boolean;
}

const READ_LIMIT = 10_000;

export class Outbox {
  private readonly handlers = new Map<string, { handler: OutboxHandler; options: TopicOptions }>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private again = false;
  /** Until start(), and after close(): appends are stored, nothing is delivered. */
  private closed = true;
  private delivered = 0;
  private failures = 0;
  private givenUp = 0;
  private readonly holding = new Set<string>();
  /** This process's lease holder name: unique per start, so that a restarted process does not inherit a dead one's lease. */
  private readonly holder = `${PROCESS_ID}:${randomUUID()}`;

  constructor(
    private readonly store: Store,
    private readonly options: OutboxOptions,
    private readonly log: Logger,
  ) {}

  private get entries() {
    return this.store.collection<OutboxEntry>(OUTBOX_COLLECTION, DEFAULT_TENANT);
  }

  private get leases() {
    return this.store.collection<LeaseDoc>(OUTBOX_LEASES_COLLECTION, DEFAULT_TENANT);
  }

  /** Who delivers `topic`'s entries (on every node: whichever holds the lease delivers). */
  handle(topic: string, handler: OutboxHandler, options: TopicOptions = {}): void {
    this.handlers.set(topic, { handler, options });
  }

  /**
   * Appends entries, in their order, and wakes this node's delivery. Resolves once they are
   * stored: answer the change that caused them after this.
   */
  async append(entries: readonly { topic: string; stream: string; payload: unknown }[]): Promise<void> {
    if (entries.length === 0) return;
    const last = await this.store.nextSequence(OUTBOX_COLLECTION.name, entries.length);
    const now = Date.now();
    await this.entries.insertMany(
      entries.map((entry, index) => ({
        id: last - entries.length + 1 + index,
        ...entry,
        createdAt: now,
        attempts: 0,
        notBefore: now,
      })),
    );
    this.wake();
  }

  /** Starts delivering: a round now, then every `pollMs` and whenever an append wakes it. */
  start(): void {
    this.closed = false;
    this.schedule(0);
  }

  /** Stops after the round in flight; the lease is left to expire (or released when held). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.running;
    await Promise.all(
      [...this.holding].map((topic) =>
        this.leases.update(topic, { until: 0 }, { holder: this.holder }).catch(() => null),
      ),
    );
    this.holding.clear();
  }

  /** A round as soon as possible (another one after the one in flight, if any). */
  wake(): void {
    if (this.closed) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  async state(): Promise<OutboxState> {
    const pending = await this.entries.find({}, { sort: { field: 'id', direction: 'asc' }, limit: READ_LIMIT });
    const oldest = pending[0]?.createdAt;
    return {
      pending: pending.length,
      lagSeconds: oldest === undefined ? 0 : Math.max(0, (Date.now() - oldest) / 1000),
      failing: pending.filter((entry) => entry.attempts > 0).length,
      delivered: this.delivered,
      failures: this.failures,
      givenUp: this.givenUp,
      leader: this.holding.size > 0,
    };
  }

  /** The oldest pending entries that failed at least once (the Admin API's view), with why. */
  async failing(limit = 20): Promise<OutboxEntry[]> {
    const pending = await this.entries.find({}, { sort: { field: 'id', direction: 'asc' }, limit: READ_LIMIT });
    return pending.filter((entry) => entry.attempts > 0).slice(0, limit);
  }

  /**
   * The oldest pending entries of every topic, at most READ_LIMIT (the Admin API's per-tenant
   * view, src/signals/delivery-view.ts); `complete` when none was left unread.
   */
  async pending(): Promise<{ entries: OutboxEntry[]; complete: boolean }> {
    const entries = await this.entries.find({}, { sort: { field: 'id', direction: 'asc' }, limit: READ_LIMIT + 1 });
    return { entries: entries.slice(0, READ_LIMIT), complete: entries.length <= READ_LIMIT };
  }

  /** Pending entries of one stream, oldest first (the Admin API's view). */
  pendingOf(stream: string, limit = 100): Promise<OutboxEntry[]> {
    return this.entries.find({ stream }, { sort: { field: 'id', direction: 'asc' }, limit });
  }

  /** A stream's entries due now (its receiver is back: the back-off is over), and a round. */
  async retryNow(stream: string): Promise<void> {
    for (const entry of await this.pendingOf(stream, this.options.batch))
      if (entry.notBefore > Date.now()) await this.entries.update(entry.id, { notBefore: Date.now() });
    this.wake();
  }

  /** Drops a stream's pending entries (its stream was deleted). */
  discard(stream: string): Promise<number> {
    return this.entries.deleteMany({ stream });
  }

  private schedule(delayMs: number): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      // One round at a time: a round asked for meanwhile runs after it.
      if (this.running) {
        this.again = true;
        return;
      }
      this.running = this.round()
        .catch((error: unknown) => this.log.warn({ err: error }, 'outbox round failed; trying again'))
        .finally(() => {
          this.running = null;
          const next = this.again ? 0 : this.options.pollMs;
          this.again = false;
          this.schedule(next);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** One pass over each topic this node holds the lease of. */
  private async round(): Promise<void> {
    for (const [topic, { handler, options }] of this.handlers) {
      if (this.closed) return;
      if (await this.lease(topic)) await this.deliver(topic, handler, options);
    }
  }

  /**
   * Takes or renews `topic`'s lease: a compare-and-set on the lease document (update only if it
   * still holds what was read), so that two nodes never both believe they hold it.
   */
  private async lease(topic: string): Promise<boolean> {
    const now = Date.now();
    const until = now + this.options.leaseMs;
    const current = await this.leases.get(topic);
    let held: boolean;
    if (!current) {
      held = await this.leases.insert({ id: topic, holder: this.holder, until }).then(
        () => true,
        (error: unknown) => {
          if (error instanceof ConflictError) return false;
          throw error;
        },
      );
    } else if (current.holder === this.holder || current.until < now) {
      held =
        (await this.leases.update(
          topic,
          { holder: this.holder, until },
          { holder: current.holder, until: current.until },
        )) !== null;
    } else held = false;
    if (held) this.holding.add(topic);
    else this.holding.delete(topic);
    return held;
  }

  /**
   * The oldest entries first, a page at a time; per stream, the first entry not yet due or
   * failing now holds the ones after it back (order per stream). Streams are independent: the
   * pages go on past a held-back stream's entries (up to READ_LIMIT entries a round), so that one
   * receiver that is down does not hold the others up.
   */
  private async deliver(topic: string, handler: OutboxHandler, options: TopicOptions): Promise<void> {
    const blocked = new Set<string>();
    const deadline = Date.now() + this.options.leaseMs / 2;
    let attempted = 0;
    let after = 0;
    for (let scanned = 0; scanned < READ_LIMIT && attempted < this.options.batch;) {
      const page = await this.entries.find(
        { topic },
        { sort: { field: 'id', direction: 'asc' }, startAt: after + 1, limit: this.options.batch },
      );
      for (const entry of page) {
        if (this.closed || Date.now() > deadline) return;
        if (blocked.has(entry.stream)) continue;
        if (options.maxAgeMs !== undefined && Date.now() - entry.createdAt > options.maxAgeMs) {
          await this.giveUp(topic, entry);
          continue;
        }
        if (entry.notBefore > Date.now()) {
          blocked.add(entry.stream);
          continue;
        }
        attempted += 1;
        if (!(await this.attempt(topic, entry, handler))) blocked.add(entry.stream);
      }
      if (page.length < this.options.batch) return;
      scanned += page.length;
      after = page[page.length - 1]!.id;
    }
  }

  /** Delivers one entry (then forgets it), or counts the failure and sets its next attempt; true when delivered. */
  private async attempt(topic: string, entry: OutboxEntry, handler: OutboxHandler): Promise<boolean> {
    try {
      await handler(entry);
      await this.entries.delete(entry.id);
      this.delivered += 1;
      return true;
    } catch (error) {
      this.failures += 1;
      const attempts = entry.attempts + 1;
      const backoff = Math.min(this.options.maxBackoffMs, this.options.backoffMs * 2 ** Math.min(attempts - 1, 20));
      const reason = error instanceof Error ? error.message : String(error);
      await this.entries.update(entry.id, {
        attempts,
        notBefore: Date.now() + backoff,
        lastError: reason.slice(0, 300),
      });
      this.log.warn({ topic, stream: entry.stream, attempts, retryInMs: backoff, reason }, 'outbox delivery failed');
      // Due again later: a round then, even if nothing else wakes this node.
      this.scheduleRetry(backoff);
      return false;
    }
  }

  /** Drops an entry past its topic's maximum age (TopicOptions.maxAgeMs): it is delivered no more. */
  private async giveUp(topic: string, entry: OutboxEntry): Promise<void> {
    await this.entries.delete(entry.id);
    this.givenUp += 1;
    this.log.warn(
      { topic, stream: entry.stream, attempts: entry.attempts, lastError: entry.lastError },
      'outbox entry given up: older than its topic allows',
    );
  }

  private scheduleRetry(delayMs: number): void {
    const retry = setTimeout(() => this.wake(), delayMs);
    retry.unref();
  }
}
