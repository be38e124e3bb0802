import { requestBegunAt } from '../http/request-start.js';
import type { Store } from './types.js';

/** How long a read stays available to the requests that began before it: longer-running ones read again. */
const SHARED_FOR_MS = 2000;
/** Reads kept for the requests under way, per store and kind: the oldest go first beyond this. */
const MAX_SHARED = 1000;
/** Reads kept while their collection is unchanged (Store.changesTo), per store and kind: the oldest go first beyond this. */
const MAX_HELD = 2000;
/**
 * Their bytes (as HeldWhileUnchanged.weigh counts them) per store and kind: the oldest go first
 * beyond this, and a read of more than a sixteenth of it is not held (found 2026-11-29: lists of
 * large delegations held by the thousand kept 2.8 MB each, growing with what callers chose to ask).
 */
const MAX_HELD_BYTES = 32 * 1024 * 1024;
/** How long a read held on a store that only announces other nodes' writes (Store.watch) serves: its staleness should an announcement be lost. */
const ANNOUNCED_HOLD_MS = 100;

/** Which reads a TurnReads keeps beyond the requests under way (see its comment). */
export interface HeldWhileUnchanged {
  /** The collections the reads are of: a write to any of them ends every held read. */
  collections: readonly string[];
  /**
   * Also on a store that announces every node's writes without being asked (Store.watch:
   * PostgreSQL's LISTEN/NOTIFY), ANNOUNCED_HOLD_MS at most: only for reads whose staleness by an
   * announcement's round trip decides nothing that must end at once on every node.
   */
  announced?: boolean;
  /** How long such an announced hold lasts at most (default ANNOUNCED_HOLD_MS): its staleness should an announcement be lost. */
  announcedHoldMs?: number;
  /** About how many bytes a value holds, for reads whose size callers choose (MAX_HELD_BYTES); without it, none. */
  weigh?: (value: never) => number;
  /** MAX_HELD_BYTES, for a test. */
  maxHeldBytes?: number;
  /**
   * False for reads a long-lived request makes again and again (a held bundle poll): a read is
   * then not handed to the requests under way that began before it, since a poll that began a
   * minute ago must still see at once a write another process made since; it is held while its
   * collections are unchanged and shared within a turn only.
   */
  sharedWithEarlierRequests?: boolean;
}

/**
 * Reads shared by the requests one event-loop turn serves, and by the requests under way that
 * began before the read did. Under load a turn carries many requests of the same client (its
 * record, the delegations it holds), each of which would read the same rows again, microseconds
 * apart; a store read costs a statement and the SQLite file checks, or a round trip to MongoDB or
 * PostgreSQL. A request makes its reads over several turns (each read is a wait), and on a node
 * that serves few requests at a time (one of several nodes behind a balancer) a turn carries few
 * of them: sharing by turn alone left each request most of its reads.
 *
 * A value is kept per store (several servers may share a process) until the turn ends or a write
 * through that store ends (Store.onWrite), whichever comes first. A writer is answered only after
 * that, so a request that starts after a write was acknowledged never sees a value read before
 * it; a value whose read overlapped a write is not kept. A write by another process is seen by the
 * next turn, as a read made a moment earlier would have missed it too. Values are shared by every
 * caller of the turn: keep records, and derive per call what depends on the clock or is changed.
 *
 * A read still under way is shared too, by the callers of the same turn that ask for its key
 * before it settles, as long as no write through the store has ended since it started: each of
 * them would have made a read at the same moment.
 *
 * Beyond the turn, a request (requestBegunAt) takes the latest read of the key, under way or done,
 * if that read started after the request began and no write through this store has ended since:
 * whatever was acknowledged before the request began, by this node or another (its caller had the
 * answer before sending this request), was in the store when that read started, so the value is
 * one the request could have read itself at a moment of its own life. A revocation answered
 * before a request began is in force for it on every node. Such reads are kept SHARED_FOR_MS at
 * most, MAX_SHARED of them per store and kind.
 *
 * Beyond both, when the reads are of named `collections` and the store can tell synchronously whether
 * it changed (Store.changesTo: SQLite, whose processes share one file), a read is kept for as long
 * as the collection is unchanged, MAX_HELD of them per store and kind: a request of each of 1,000
 * tenants then reads nothing of its client and delegations, which no other request of its turn
 * shares. A write ends them before its writer is answered, on this process at once and on another
 * at its next question; a document the store lets expire by itself (a numeric `expiresAt`) is kept
 * until then at most, as its expiry writes nothing. Where the store only announces writes
 * (Store.watch), reads marked `announced` are held the same way, ended by the announcement of
 * any node's write (this node's before its writer is answered, another's within a round trip) and
 * ANNOUNCED_HOLD_MS at most, should an announcement be lost.
 */
export class TurnReads<V> {
  private readonly kept = new WeakMap<Store, Map<string, V>>();
  /** Reads under way, per store: the write count they started at, and their value. */
  private readonly loading = new WeakMap<Store, Map<string, { writes: number; value: Promise<V> }>>();
  /** Writes ended so far, per store: a read that saw this number change is not kept. */
  private readonly writes = new WeakMap<Store, number>();
  /** The latest read of each key per store, for the requests that began before it (dropped at a write). */
  private readonly latest = new WeakMap<Store, Map<string, { startedAt: number; value: Promise<V> }>>();
  /** Reads kept while the collection is unchanged, per store: the count of its changes they were read at, and until when they serve. */
  private readonly held = new WeakMap<
    Store,
    Map<string, { changes: number; until: number; value: V; bytes: number }>
  >();
  /** The bytes of the reads held, per store. */
  private readonly heldBytes = new WeakMap<Store, number>();
  /** Announced writes to the collections per store (Store.watch), counted as they arrive. */
  private readonly announcedChanges = new WeakMap<Store, { count: number }>();

  /** Without `heldWhileUnchanged`, reads serve the requests under way only. */
  constructor(private readonly heldWhileUnchanged?: HeldWhileUnchanged) {}

  /** `load`'s value for `key`, read at most once this turn; a value `keep` refuses is not kept (so is read again). */
  async read(store: Store, key: string, load: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    const values = this.kept.get(store);
    if (values?.has(key)) return values.get(key)!;
    const changes = this.changesOf(store);
    const held = changes === undefined ? undefined : this.held.get(store)?.get(key);
    if (held && held.changes === changes?.count && performance.now() < held.until) return held.value;
    const writesBefore = this.writesThrough(store);
    const reads = this.readsUnderWay(store);
    const underWay = reads.get(key);
    if (underWay?.writes === writesBefore) return underWay.value;
    const sharing = this.heldWhileUnchanged?.sharedWithEarlierRequests !== false;
    const begunAt = requestBegunAt();
    const shared = sharing ? this.latestRead(store, key) : undefined;
    if (begunAt !== undefined && shared && shared.startedAt >= begunAt) return shared.value;
    const startedAt = performance.now();
    const loading = load();
    reads.set(key, { writes: writesBefore, value: loading });
    if (sharing) this.share(store, key, startedAt, loading, keep);
    try {
      const value = await loading;
      if (keep(value) && this.writes.get(store) === writesBefore) this.valuesOfThisTurn(store).set(key, value);
      if (changes !== undefined && keep(value)) this.hold(store, key, changes, value);
      return value;
    } finally {
      if (reads.get(key)?.value === loading) reads.delete(key);
    }
  }

  /** Keeps a read while the collection is still as it was when the read started, and its documents have not expired. */
  private hold(store: Store, key: string, changes: { count: number; until: number }, value: V): void {
    if (this.changesOf(store)?.count !== changes.count) return;
    // Until its first document expires at the latest: the store stops answering it without a write.
    const expiry = earliestExpiry(value);
    const until =
      expiry === undefined ? changes.until : Math.min(changes.until, performance.now() + expiry - Date.now());
    if (until <= performance.now()) return;
    const weigh = this.heldWhileUnchanged?.weigh as ((value: V) => number) | undefined;
    const bytes = weigh?.(value) ?? 0;
    const maxBytes = this.heldWhileUnchanged?.maxHeldBytes ?? MAX_HELD_BYTES;
    if (bytes > maxBytes / 16) return;
    let reads = this.held.get(store);
    if (!reads) this.held.set(store, (reads = new Map()));
    this.letGo(store, reads, key);
    reads.set(key, { changes: changes.count, until, value, bytes });
    this.heldBytes.set(store, (this.heldBytes.get(store) ?? 0) + bytes);
    for (const [oldest] of reads) {
      if (reads.size <= MAX_HELD && this.heldBytes.get(store)! <= maxBytes) break;
      this.letGo(store, reads, oldest);
    }
  }

  private letGo(store: Store, reads: Map<string, { bytes: number }>, key: string): void {
    const read = reads.get(key);
    if (!read) return;
    reads.delete(key);
    this.heldBytes.set(store, this.heldBytes.get(store)! - read.bytes);
  }

  /** The collection's count of changes as this node knows it, and until when a read started now may serve; undefined: reads are not held. */
  private changesOf(store: Store): { count: number; until: number } | undefined {
    const heldReads = this.heldWhileUnchanged;
    if (!heldReads) return undefined;
    const { changesTo } = store;
    if (changesTo) {
      // Each collection's count only grows: their sum moves with a write to any of them.
      const count = heldReads.collections.reduce((sum, collection) => sum + changesTo.call(store, collection), 0);
      return { count, until: Infinity };
    }
    if (!heldReads.announced || !store.watch) return undefined;
    let announced = this.announcedChanges.get(store);
    if (!announced) {
      const counted = { count: 0 };
      store.watch(heldReads.collections, () => {
        counted.count += 1;
        this.held.delete(store);
        this.heldBytes.delete(store);
      });
      this.announcedChanges.set(store, (announced = counted));
    }
    return { count: announced.count, until: performance.now() + (heldReads.announcedHoldMs ?? ANNOUNCED_HOLD_MS) };
  }

  /** The latest read of `key` through `store` since the last write ended, if not too old. */
  private latestRead(store: Store, key: string): { startedAt: number; value: Promise<V> } | undefined {
    const read = this.latest.get(store)?.get(key);
    return read && performance.now() - read.startedAt <= SHARED_FOR_MS ? read : undefined;
  }

  /** Offers a read to the requests under way that began before it; one that fails or that `keep` refuses is taken back. */
  private share(store: Store, key: string, startedAt: number, value: Promise<V>, keep: (value: V) => boolean): void {
    let reads = this.latest.get(store);
    if (!reads) this.latest.set(store, (reads = new Map()));
    reads.delete(key); // the newest last, so that the oldest are the first let go
    reads.set(key, { startedAt, value });
    for (const [oldest] of reads) {
      if (reads.size <= MAX_SHARED) break;
      reads.delete(oldest);
    }
    const takeBack = () => {
      const offered = this.latest.get(store);
      if (offered?.get(key)?.value === value) offered.delete(key);
    };
    value.then((settled) => keep(settled) || takeBack(), takeBack);
  }

  /** This turn's reads under way (a read that outlasts its turn is not joined by a later one). */
  private readsUnderWay(store: Store): Map<string, { writes: number; value: Promise<V> }> {
    let reads = this.loading.get(store);
    if (!reads) {
      const fresh = new Map<string, { writes: number; value: Promise<V> }>();
      this.loading.set(store, fresh);
      setImmediate(() => {
        if (this.loading.get(store) === fresh) this.loading.delete(store);
      });
      reads = fresh;
    }
    return reads;
  }

  private writesThrough(store: Store): number {
    let count = this.writes.get(store);
    if (count === undefined) {
      count = 0;
      this.writes.set(store, count);
      store.onWrite(() => {
        this.kept.delete(store);
        this.latest.delete(store);
        this.writes.set(store, this.writes.get(store)! + 1);
      });
    }
    return count;
  }

  private valuesOfThisTurn(store: Store): Map<string, V> {
    let values = this.kept.get(store);
    if (!values) {
      const fresh = new Map<string, V>();
      this.kept.set(store, fresh);
      // Only this turn's map: a write may have dropped it and a later read made another.
      setImmediate(() => {
        if (this.kept.get(store) === fresh) this.kept.delete(store);
      });
      values = fresh;
    }
    return values;
  }
}

/** When the first document of a value (one, or a list) expires in the store (epoch ms), if any does. */
function earliestExpiry(value: unknown): number | undefined {
  const expiries = (Array.isArray(value) ? value : [value])
    .map((doc) => (typeof doc === 'object' && doc !== null ? (doc as { expiresAt?: unknown }).expiresAt : undefined))
    .filter((expiresAt): expiresAt is number => typeof expiresAt === 'number');
  return expiries.length ? Math.min(...expiries) : undefined;
}
