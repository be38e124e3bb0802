import type { Store } from './types.js';

/**
 * Reads shared by the requests one event-loop turn serves. Under load a turn carries many
 * requests of the same client (its record, the delegations it holds), each of which would read
 * the same rows again, microseconds apart; a store read costs a statement and the SQLite file
 * checks, or a round trip to MongoDB.
 *
 * A value is kept per store (several servers may share a process) until the turn ends or a write
 * through that store ends (Store.onWrite), whichever comes first. A writer is answered only after
 * that, so a request that starts after a write was acknowledged never sees a value read before
 * it; a value whose read overlapped a write is not kept. A write by another process is seen by the
 * next turn, as a read made a moment earlier would have missed it too. Values are shared by every
 * caller of the turn: keep records, and derive per call what depends on the clock or is changed.
 */
export class TurnReads<V> {
  private readonly kept = new WeakMap<Store, Map<string, V>>();
  /** Writes ended so far, per store: a read that saw this number change is not kept. */
  private readonly writes = new WeakMap<Store, number>();

  /** `load`'s value for `key`, read at most once this turn; a value `keep` refuses is not kept (so is read again). */
  async read(store: Store, key: string, load: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    const values = this.kept.get(store);
    if (values?.has(key)) return values.get(key)!;
    const writesBefore = this.writesThrough(store);
    const value = await load();
    if (keep(value) && this.writes.get(store) === writesBefore) this.valuesOfThisTurn(store).set(key, value);
    return value;
  }

  private writesThrough(store: Store): number {
    let count = this.writes.get(store);
    if (count === undefined) {
      count = 0;
      this.writes.set(store, count);
      store.onWrite(() => {
        this.kept.delete(store);
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
