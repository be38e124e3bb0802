import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import { buildBundle, snapshotOf, type PolicySnapshot } from './build.js';
import { loadBundledRecords, POLICY_DATA, POLICY_RULES } from '../records.js';
import { OpaNotFoundError, resolveOpaBinary } from '../opa/binary.js';
import { sandboxProblem } from './validate.js';

/**
 * The current shared policy set, read from the store. Reads are cheap (two queries) but
 * building the bundle and compiling Cedar are not, so the snapshot object is kept as long as
 * its revision is unchanged and derived artifacts are cached per revision.
 *
 * On a store that announces writes to every node (Store.watch: PostgreSQL's LISTEN/NOTIFY), a
 * write to the policy records drops the kept snapshot at once and wakes the bundle's long polls,
 * so that a change is in force on every node within a round trip; on SQLite the writes of this
 * process do so (Store.onWriteTo), and other processes' are seen by the long polls' looks. The
 * re-reads by age stay as the fallback (and are all there is on MongoDB).
 */
export class PolicySnapshots {
  private latest: { snapshot: PolicySnapshot; loadedAt: number } | null = null;
  private loading: Promise<PolicySnapshot> | null = null;
  private builtBundle: { revision: string; body: Promise<Buffer> } | null = null;
  /** Announced policy writes so far: a read that started before one is not kept as fresh. */
  private changes = 0;
  private waiters: (() => void)[] = [];

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly opaBinary = resolveOpaBinary(null),
  ) {
    const policyCollections = [POLICY_RULES.name, POLICY_DATA.name];
    // Every node's writes where the store announces them (watch); else this process's own, and the
    // held requests' looks see other processes'.
    if (store.watch) store.watch(policyCollections, () => this.policyWritten());
    else store.onWriteTo?.(policyCollections, () => this.policyWritten());
  }

  /** Resolves at the next announced policy write, or after `ms` (the caller polls then). */
  nextChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms).unref();
      const waiters = this.waiters;
      function done() {
        clearTimeout(timer);
        const index = waiters.indexOf(done);
        if (index >= 0) waiters.splice(index, 1);
        resolve();
      }
      waiters.push(done);
    });
  }

  private policyWritten(): void {
    this.changes += 1;
    if (this.latest) this.latest.loadedAt = Number.NEGATIVE_INFINITY;
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** The snapshot, re-read from the store when the cached one is older than `maxAgeMs` (0: always re-read). */
  async current(maxAgeMs = 0): Promise<PolicySnapshot> {
    // `<`, not `<=`: with 0, a snapshot loaded in this very millisecond (before a write that just ended) is not served.
    if (this.latest && Date.now() - this.latest.loadedAt < maxAgeMs) return this.latest.snapshot;
    this.loading ??= this.reload().finally(() => {
      this.loading = null;
    });
    return this.loading;
  }

  /** The last snapshot read successfully, for callers that prefer stale policy to none while the store is down. */
  lastKnown(): PolicySnapshot | null {
    return this.latest?.snapshot ?? null;
  }

  /**
   * The gzipped bundle of a snapshot, built once per revision; refused (the promise rejects, the
   * bundle route answers OPA 503 and OPA keeps the revision it has) while a rule uses a builtin
   * the sandbox forbids. A refusal is not kept: the next request checks again.
   */
  bundle(snapshot: PolicySnapshot): Promise<Buffer> {
    if (this.builtBundle?.revision !== snapshot.revision) {
      const body = buildBundle(snapshot).then((bundle) => this.sandboxed(snapshot.revision, bundle));
      this.builtBundle = { revision: snapshot.revision, body };
      body.catch(() => {
        if (this.builtBundle?.body === body) this.builtBundle = null;
      });
    }
    return this.builtBundle.body;
  }

  /** The bundle, once OPA with the sandbox's capabilities finds no forbidden builtin in it (no local OPA: a warning). */
  private async sandboxed(revision: string, bundle: Buffer): Promise<Buffer> {
    const problem = await sandboxProblem(this.opaBinary, bundle).catch((error: unknown) => {
      if (!(error instanceof OpaNotFoundError)) throw error;
      this.log.warn({ revision, reason: error.message }, 'policy bundle served unchecked by the sandbox');
      return null;
    });
    if (problem) throw new Error(`policy bundle revision ${revision} is not served: ${problem}`);
    return bundle;
  }

  private async reload(): Promise<PolicySnapshot> {
    const changesBefore = this.changes;
    const fresh = snapshotOf(await loadBundledRecords(this.store));
    const previous = this.latest?.snapshot;
    const snapshot = previous?.revision === fresh.revision ? previous : fresh;
    if (snapshot === fresh) this.announce(fresh, previous?.revision);
    // Read before a write announced meanwhile: served to this read's callers, but not kept as fresh.
    this.latest = { snapshot, loadedAt: this.changes === changesBefore ? Date.now() : Number.NEGATIVE_INFINITY };
    return snapshot;
  }

  private announce(snapshot: PolicySnapshot, previousRevision: string | undefined): void {
    this.log.info(
      { revision: snapshot.revision, previousRevision, rules: snapshot.rules.length, data: snapshot.data.length },
      'policy bundle revision',
    );
    for (const reason of snapshot.skipped) this.log.warn({ reason }, 'policy record left out of the bundle');
  }
}
