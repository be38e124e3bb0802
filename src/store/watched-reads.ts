import type { Store } from './types.js';

/** How long a kept value serves at most: the bound on its staleness should an announcement be lost. */
const KEPT_FOR_MS = 100;
/** Values kept per store and kind: the oldest go first beyond this. */
const MAX_KEPT = 1000;

interface Kept<V> {
  value: Promise<V>;
  readAt: number;
  /** The earliest store expiry (epoch ms) among the documents read, once settled: the store stops answering them then without a write. */
  expiresAt?: number;
}

/** One store's kept values, and the count of the announced writes that ended them. */
interface StoreState<V> {
  values: Map<string, Kept<V>>;
  changes: number;
}

/**
 * Values a node keeps between requests (a client's record, the delegations it holds), for stores
 * that announce every node's writes to the collections they come from (Store.watch: PostgreSQL's
 * LISTEN/NOTIFY). Every token request reads its client's record and delegations: shared only by
 * the requests of a turn or begun before the read (TurnReads), that was still about one read in
 * four tokens per node, and a second node made as many more.
 *
 * A write to one of the collections ends every value of this kind on the writing node before its
 * writer is answered (the store tells its watchers first), and on the other nodes when the
 * announcement arrives (within a round trip; measured in test/store/postgresql.test.ts). A value
 * also serves KEPT_FOR_MS at most, so that one whose announcement was lost (a LISTEN connection
 * down) is stale that long at worst, and none past the store expiry of a document it holds. A read
 * under way when a write ends is not kept. Stores that
 * announce nothing keep nothing here: `read` answers undefined and the caller reads as before.
 */
export class WatchedReads<V> {
  private readonly stores = new WeakMap<Store, StoreState<V> | null>();

  constructor(private readonly collections: readonly string[]) {}

  /** `load`'s value for `key`, kept while no write to the collections ended; undefined where the store cannot announce. */
  read(store: Store, key: string, load: () => Promise<V>, keep: (value: V) => boolean): Promise<V> | undefined {
    const state = this.stateOf(store);
    if (!state) return undefined;
    const now = performance.now();
    const kept = state.values.get(key);
    if (kept && now - kept.readAt <= KEPT_FOR_MS && Date.now() < (kept.expiresAt ?? Infinity)) return kept.value;
    const value = load();
    const entry: Kept<V> = { value, readAt: now };
    state.values.delete(key); // the newest last, so that the oldest are the first let go
    state.values.set(key, entry);
    for (const [oldest] of state.values) {
      if (state.values.size <= MAX_KEPT) break;
      state.values.delete(oldest);
    }
    const changesBefore = state.changes;
    const forget = () => {
      if (state.values.get(key) === entry) state.values.delete(key);
    };
    value.then((settled) => {
      entry.expiresAt = earliestExpiry(settled);
      if (!keep(settled) || state.changes !== changesBefore) forget();
    }, forget);
    return value;
  }

  private stateOf(store: Store): StoreState<V> | null {
    let state = this.stores.get(store);
    if (state !== undefined) return state;
    if (!store.watch) {
      this.stores.set(store, null);
      return null;
    }
    const fresh: StoreState<V> = { values: new Map(), changes: 0 };
    store.watch(this.collections, () => {
      fresh.values.clear();
      fresh.changes += 1;
    });
    this.stores.set(store, (state = fresh));
    return state;
  }
}

/** The earliest numeric `expiresAt` of a document or of a list of them (a store expiry: see StoredDoc). */
function earliestExpiry(value: unknown): number | undefined {
  const documents: unknown[] = Array.isArray(value) ? value : [value];
  let earliest: number | undefined;
  for (const document of documents) {
    const expiresAt = (document as { expiresAt?: unknown } | null)?.expiresAt;
    if (typeof expiresAt === 'number' && expiresAt < (earliest ?? Infinity)) earliest = expiresAt;
  }
  return earliest;
}
