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
   * (`givenUp`, reason `max-age`), logged, and dropped, so that it holds its stream up no longer.
   * Absent: never.
   */
  maxAgeMs?: number;
  /**
   * The tenant an entry is for, read from its payload: an entry of a tenant that no longer exists
   * (OutboxOptions.tenantExists) is given up at once (reason `tenant-gone`), not tried until its
   * maximum age. Absent: entries of this topic belong to no tenant.
   */
  tenantOf?: (payload: unknown) => string | undefined;
}

/** Why an entry was dropped undelivered: past its topic's maximum age, or its tenant is gone. */
export type GiveUpReason = 'max-age' | 'tenant-gone';

/** What happened to one entry's attempt, for per-topic counters (/metrics). */
export type OutboxOutcome =
  { topic: string; outcome: 'delivered' | 'failed' } | { topic: string; outcome: 'given_up'; reason: GiveUpReason };

export interface OutboxOptions {
  /** How often a node looks for work (and for the lease) when nothing woke it. */
  pollMs: number;
  /** How long a lease lasts without being renewed: the longest a dead holder delays delivery. */
  leaseMs: number;
  /** The first retry's delay; each next one doubles, up to `maxBackoffMs`. */
  backoffMs: number;
  maxBackoffMs: number;
  /**
   * Entries attempted per round (about: the streams delivered at once may each start one more), and
   * entries read per page.
   */
  batch: number;
  /**
   * The most topics a node delivers at once (each topic has its own round and lease, so that a
   * long policy recheck does not hold up SETs or logout tokens). Default 4.
   */
  concurrency?: number;
  /** Whether a tenant still exists (TopicOptions.tenantOf); absent: every tenant does. */
  tenantExists?: (tenant: string) => Promise<boolean>;
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
  /** Entries this node gave up since it started (past their topic's `maxAgeMs`, or of a tenant that is gone). */
  givenUp: number;
  /** The same counts per topic (those this node has counted any of), given up per reason. */
  topics: Record<string, TopicCounts>;
  /** Whether this process holds a lease (of any topic) now. */
  leader: boolean;
}

/** What this node counted of one topic's entries since it started. */
export interface TopicCounts {
  delivered: number;
  failures: number;
  givenUp: Record<GiveUpReason, number>;
}

const READ_LIMIT = 10_000;
/** Streams a round delivers at once (each one entry after another). */
const STREAMS_AT_ONCE = 16;
/**
 * Streams whose last attempt failed that a round tries, after the others: a receiver that is down
 * holds its attempt up to OUTBOUND_TIMEOUT_MS, and a round ends with its slowest lane, so with
 * every failing stream in each round the streams that answer waited behind all of them (found
 * 2026-11-29: 48 receivers down, a SET to one that answers waited 15 s). With these few, it
 * waits about one timeout however many are down; the failing ones take turns, round after round.
 */
export const FAILING_STREAMS_PER_ROUND = 8;
const DEFAULT_CONCURRENCY = 4;

/** One topic's delivery on this node: its handler, and its own round loop. */
interface TopicRun {
  handler: OutboxHandler;
  options: TopicOptions;
  timer?: NodeJS.Timeout;
  running: Promise<void> | null;
  /** A round was asked for while one ran: another follows at once. */
  again: boolean;
  /** The lease was found taken by another node while delivering: stop after the entry in hand. */
  lost: boolean;
  /**
   * The streams known to hold entries of the topic, in the order their heads are tried: found by
   * this node's appends and by the scan; a stream found empty is dropped. Each round moves the
   * streams it served to the end, so that no stream's backlog always goes first.
   */
  streams: Set<string>;
  /** Of those, the ones whose last attempt failed (FAILING_STREAMS_PER_ROUND). */
  failing: Set<string>;
  /** Where the scan for streams goes on at the next round: the last entry id it read (0: from the oldest). */
  scannedTo: number;
  /** When the scan last started from the oldest entry (epoch ms). */
  scanFromOldestAt: number;
}

/** What one round of a topic has used of its batch and time, across the streams it serves. */
interface DeliveryRound {
  attempted: number;
  /** A stream's full page was done: it may hold more, due now. */
  pageDone: boolean;
  deadline: number;
  /** Whether a tenant is gone, asked once per tenant and round. */
  tenantGone: (tenant: string) => Promise<boolean>;
}

export class Outbox {
  private readonly topics = new Map<string, TopicRun>();
  /** Until start(), and after close(): appends are stored, nothing is delivered. */
  private closed = true;
  private delivered = 0;
  private failures = 0;
  private givenUp = 0;
  private readonly counts = new Map<string, TopicCounts>();
  private readonly holding = new Set<string>();
  /** This process's lease holder name: unique per start, so that a restarted process does not inherit a dead one's lease. */
  private readonly holder = `${PROCESS_ID}:${randomUUID()}`;
  /** Rounds running now, and rounds waiting for one of them to end (OutboxOptions.concurrency). */
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly observers: ((outcome: OutboxOutcome) => void)[] = [];

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

  /** Who delivers `topic`'s entries (on every node: whichever holds the topic's lease delivers). */
  handle(topic: string, handler: OutboxHandler, options: TopicOptions = {}): void {
    this.topics.set(topic, {
      handler,
      options,
      running: null,
      again: false,
      lost: false,
      streams: new Set(),
      failing: new Set(),
      scannedTo: 0,
      scanFromOldestAt: 0,
    });
    if (!this.closed) this.schedule(topic, 0);
  }

  /** Told of each attempt's outcome (per-topic counters in /metrics). */
  observe(observer: (outcome: OutboxOutcome) => void): void {
    this.observers.push(observer);
  }

  /**
   * Appends entries, in their order, and wakes this node's delivery of their topics. Resolves once
   * they are stored: answer the change that caused them after this.
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
    this.noteStreams(entries);
    for (const topic of new Set(entries.map((entry) => entry.topic))) this.wake(topic);
  }

  /**
   * Streams this node delivers (it holds their topic's lease) that hold entries now: its next round
   * tries them without waiting for its scan. Another node's are found by that node's scan, so that
   * a node that delivers nothing keeps no list of streams.
   */
  private noteStreams(entries: readonly { topic: string; stream: string }[]): void {
    for (const entry of entries)
      if (this.holding.has(entry.topic)) this.topics.get(entry.topic)?.streams.add(entry.stream);
  }

  /** Starts delivering: a round of each topic now, then every `pollMs` and whenever an append wakes it. */
  start(): void {
    this.closed = false;
    for (const topic of this.topics.keys()) this.schedule(topic, 0);
  }

  /** Stops after the rounds in flight; the leases held are released. */
  async close(): Promise<void> {
    this.closed = true;
    for (const run of this.topics.values()) clearTimeout(run.timer);
    await Promise.all([...this.topics.values()].map((run) => run.running));
    await Promise.all(
      [...this.holding].map((topic) =>
        this.leases.update(topic, { until: 0 }, { holder: this.holder }).catch(() => null),
      ),
    );
    this.holding.clear();
  }

  /** A round of `topic` (of every topic when none is named) as soon as possible, or after the one in flight. */
  wake(topic?: string): void {
    if (this.closed) return;
    for (const name of topic === undefined ? this.topics.keys() : [topic]) {
      const run = this.topics.get(name);
      if (!run) continue;
      if (run.running) run.again = true;
      else this.schedule(name, 0);
    }
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
      topics: Object.fromEntries(
        [...this.counts].map(([topic, counts]) => [topic, { ...counts, givenUp: { ...counts.givenUp } }]),
      ),
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

  /** A stream's entries due now (its receiver is back: the back-off is over), and a round of their topics. */
  async retryNow(stream: string): Promise<void> {
    const entries = await this.pendingOf(stream, this.options.batch);
    for (const entry of entries)
      if (entry.notBefore > Date.now()) await this.entries.update(entry.id, { notBefore: Date.now() });
    this.noteStreams(entries);
    for (const topic of new Set(entries.map((entry) => entry.topic))) this.wake(topic);
  }

  /** Drops a stream's pending entries (its stream was deleted). */
  discard(stream: string): Promise<number> {
    return this.entries.deleteMany({ stream });
  }

  private schedule(topic: string, delayMs: number): void {
    const run = this.topics.get(topic);
    if (this.closed || !run) return;
    clearTimeout(run.timer);
    run.timer = setTimeout(() => {
      // One round of a topic at a time: a round asked for meanwhile runs after it.
      if (run.running) {
        run.again = true;
        return;
      }
      run.running = this.round(topic, run)
        .catch((error: unknown) => this.log.warn({ err: error, topic }, 'outbox round failed; trying again'))
        .finally(() => {
          run.running = null;
          const next = run.again ? 0 : this.options.pollMs;
          run.again = false;
          this.schedule(topic, next);
        });
    }, delayMs);
    run.timer.unref();
  }

  /**
   * One pass over `topic`, when this node holds (or takes) its lease: within a slot of the node's
   * concurrency, and renewing the lease while it delivers, so that a handler that runs longer than
   * the lease keeps it (no other node starts the same entry meanwhile).
   */
  private async round(topic: string, run: TopicRun): Promise<void> {
    await this.slot();
    try {
      if (this.closed || !(await this.hasEntries(topic))) return;
      if (!(await this.lease(topic))) {
        // Another node delivers: what this one knew of the topic's streams is its no more.
        run.streams.clear();
        run.failing.clear();
        run.scannedTo = 0;
        return;
      }
      run.lost = false;
      const renewal = setInterval(() => void this.renew(topic, run), Math.max(1, this.options.leaseMs / 3));
      renewal.unref();
      try {
        await this.deliver(topic, run);
      } finally {
        clearInterval(renewal);
      }
    } finally {
      this.release();
    }
  }

  /**
   * Whether `topic` holds any entry: an idle topic's round writes nothing (no lease taken or
   * renewed), so that every node's idle poll of every topic costs a read, not a store write. A
   * count that stops at one: the first entry in order (find) would have a store sort every entry
   * of the topic, each round, while a receiver that is down holds thousands back.
   */
  private async hasEntries(topic: string): Promise<boolean> {
    const idle = (await this.entries.count({ topic }, undefined, 1)) === 0;
    // Its lease, not renewed, lapses: whichever node next finds work takes it.
    if (idle) this.holding.delete(topic);
    return !idle;
  }

  /** Waits for one of the node's `concurrency` delivery slots. */
  private async slot(): Promise<void> {
    if (this.active < (this.options.concurrency ?? DEFAULT_CONCURRENCY)) {
      this.active += 1;
      return;
    }
    // The slot is handed over by release(): `active` stays counted for it.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active -= 1;
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
   * Extends a lease this node holds while its round runs (only while still this node's: another
   * node that took it after a lapse keeps it, and this round stops after the entry in hand).
   */
  private async renew(topic: string, run: TopicRun): Promise<void> {
    const renewed = await this.leases
      .update(topic, { until: Date.now() + this.options.leaseMs }, { holder: this.holder })
      .catch((error: unknown) => {
        this.log.warn({ err: error, topic }, 'outbox lease could not be renewed');
        return undefined;
      });
    if (renewed !== null) return;
    run.lost = true;
    this.holding.delete(topic);
    this.log.warn({ topic }, 'outbox lease taken by another node during a round; stopping it');
  }

  /**
   * Each stream's entries in order, from its head (the `(stream, id)` index): the first entry not
   * yet due or failing now holds the ones after it back (order per stream). Streams are
   * independent: a stream that holds back any number of entries costs the round one read, so that
   * one receiver that is down holds no other stream up, however long its backlog. The streams come
   * from this node's appends and from a scan of the topic's entries that goes on, round after
   * round, where the last one stopped (READ_LIMIT entries a round): entries other nodes appended,
   * and those left by a node that stopped, are found within a few rounds whatever the backlog ahead.
   * Up to STREAMS_AT_ONCE streams are delivered at once, each in order: a receiver that answers
   * slowly (up to OUTBOUND_TIMEOUT_MS an attempt) holds its own stream up, not the others of the round.
   */
  private async deliver(topic: string, run: TopicRun): Promise<void> {
    await this.scanForStreams(topic, run);
    const round: DeliveryRound = {
      attempted: 0,
      pageDone: false,
      deadline: Date.now() + this.options.leaseMs / 2,
      tenantGone: this.tenantCheck(),
    };
    const known = [...run.streams];
    const failing = known.filter((stream) => run.failing.has(stream));
    const streams = [
      ...known.filter((stream) => !run.failing.has(stream)),
      ...failing.slice(0, FAILING_STREAMS_PER_ROUND),
    ];
    let next = 0;
    // Failing streams left out wait for the rounds their retries or the poll start (each failure
    // schedules one): not the next one at once, which would read their heads again and again
    // while they back off.
    let cutShort = false;
    const lane = async () => {
      while (next < streams.length) {
        if (this.roundOver(run, round)) {
          cutShort = true;
          return;
        }
        const stream = streams[next++]!;
        const holdsMore = await this.deliverStream(topic, stream, run, round);
        run.streams.delete(stream);
        if (holdsMore) run.streams.add(stream);
        else run.failing.delete(stream);
      }
    };
    await Promise.all(Array.from({ length: Math.min(STREAMS_AT_ONCE, streams.length) }, lane));
    if (this.closed || run.lost) return;
    if (cutShort || round.attempted >= this.options.batch || round.pageDone) this.continueAtOnce(run);
  }

  /** Whether the round is to stop: the outbox closes, the lease was lost, or its time or batch is used up. */
  private roundOver(run: TopicRun, round: DeliveryRound): boolean {
    return this.closed || run.lost || Date.now() > round.deadline || round.attempted >= this.options.batch;
  }

  /**
   * Reads up to READ_LIMIT of the topic's entries from where the last round's scan stopped, noting
   * their streams. Past the newest, the next round reads only newer ones, except that the scan
   * starts again from the oldest once per OUTBOX_POLL_MS: an entry another node appended may
   * become visible after a newer one (its id was drawn first), and a burst drained in rounds that
   * follow at once must not read its whole backlog again at every round.
   */
  private async scanForStreams(topic: string, run: TopicRun): Promise<void> {
    if (run.scannedTo === 0) run.scanFromOldestAt = Date.now();
    for (let scanned = 0; scanned < READ_LIMIT;) {
      const page = await this.entries.find(
        { topic },
        { sort: { field: 'id', direction: 'asc' }, startAt: run.scannedTo + 1, limit: this.options.batch },
      );
      for (const entry of page) run.streams.add(entry.stream);
      if (page.length > 0) run.scannedTo = page[page.length - 1]!.id;
      if (page.length < this.options.batch) {
        if (Date.now() - run.scanFromOldestAt >= this.options.pollMs) run.scannedTo = 0;
        return;
      }
      scanned += page.length;
    }
  }

  /**
   * Delivers one stream's due entries, oldest first, until one is not yet due or fails (or the
   * round's batch or time is used); false when the stream holds no entry of the topic any more.
   * Stream keys are their topic's own (`ssf:<tenant>:<id>`, …): the read is by stream alone, so
   * that the store takes the `(stream, id)` index, and an entry of another topic is left to it.
   */
  private async deliverStream(topic: string, stream: string, run: TopicRun, round: DeliveryRound): Promise<boolean> {
    const { handler, options } = run;
    const page = await this.entries.find(
      { stream },
      { sort: { field: 'id', direction: 'asc' }, limit: this.options.batch },
    );
    const ours = page.filter((entry) => entry.topic === topic);
    for (const entry of ours) {
      if (this.roundOver(run, round)) return true;
      const tenant = options.tenantOf?.(entry.payload);
      if (tenant !== undefined && (await round.tenantGone(tenant))) {
        await this.giveUp(topic, entry, 'tenant-gone');
        continue;
      }
      if (options.maxAgeMs !== undefined && Date.now() - entry.createdAt > options.maxAgeMs) {
        await this.giveUp(topic, entry, 'max-age');
        continue;
      }
      if (entry.notBefore > Date.now()) return true;
      round.attempted += 1;
      if (!(await this.attempt(topic, entry, handler))) {
        run.failing.add(stream);
        return true;
      }
      run.failing.delete(stream);
    }
    if (page.length < this.options.batch) return false;
    // A full page done (delivered or given up) may have more behind it: the next round at once.
    round.pageDone = true;
    return true;
  }

  /**
   * A round that stopped with entries still to try (its batch or its time used up) is followed by
   * the next one at once rather than after OUTBOX_POLL_MS: a burst drains at the handlers' pace
   * (bench/signals-delivery.ts: 59-64 SETs/s waiting, 159 without the wait).
   */
  private continueAtOnce(run: TopicRun): void {
    run.again = true;
  }

  /** Delivers one entry (then forgets it), or counts the failure and sets its next attempt; true when delivered. */
  private async attempt(topic: string, entry: OutboxEntry, handler: OutboxHandler): Promise<boolean> {
    try {
      await handler(entry);
      await this.entries.delete(entry.id);
      this.delivered += 1;
      this.count({ topic, outcome: 'delivered' });
      return true;
    } catch (error) {
      this.failures += 1;
      this.count({ topic, outcome: 'failed' });
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
      this.scheduleRetry(topic, backoff);
      return false;
    }
  }

  /** Drops an entry that is delivered no more: past its topic's maximum age, or of a tenant that is gone. */
  private async giveUp(topic: string, entry: OutboxEntry, reason: GiveUpReason): Promise<void> {
    await this.entries.delete(entry.id);
    this.givenUp += 1;
    this.count({ topic, outcome: 'given_up', reason });
    this.log.warn(
      { topic, stream: entry.stream, attempts: entry.attempts, lastError: entry.lastError, reason },
      reason === 'max-age'
        ? 'outbox entry given up: older than its topic allows'
        : 'outbox entry given up: its tenant no longer exists',
    );
  }

  /** Whether a tenant is gone, asked once per tenant and round. */
  private tenantCheck(): (tenant: string) => Promise<boolean> {
    const known = new Map<string, Promise<boolean>>();
    const exists = this.options.tenantExists;
    return (tenant) => {
      if (!exists) return Promise.resolve(false);
      let gone = known.get(tenant);
      if (!gone) known.set(tenant, (gone = exists(tenant).then((found) => !found)));
      return gone;
    };
  }

  private count(outcome: OutboxOutcome): void {
    let counts = this.counts.get(outcome.topic);
    if (!counts) {
      counts = { delivered: 0, failures: 0, givenUp: { 'max-age': 0, 'tenant-gone': 0 } };
      this.counts.set(outcome.topic, counts);
    }
    if (outcome.outcome === 'given_up') counts.givenUp[outcome.reason] += 1;
    else if (outcome.outcome === 'delivered') counts.delivered += 1;
    else counts.failures += 1;
    for (const observer of this.observers) observer(outcome);
  }

  private scheduleRetry(topic: string, delayMs: number): void {
    const retry = setTimeout(() => this.wake(topic), delayMs);
    retry.unref();
  }
}
