import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import { buildBundle, snapshotOf, type PolicySnapshot } from './build.js';
import { loadBundledRecords } from '../records.js';

/**
 * The current shared policy set, read from the store. Reads are cheap (two queries) but
 * building the bundle and compiling Cedar are not, so the snapshot object is kept as long as
 * its revision is unchanged and derived artifacts are cached per revision.
 */
export class PolicySnapshots {
  private latest: { snapshot: PolicySnapshot; loadedAt: number } | null = null;
  private loading: Promise<PolicySnapshot> | null = null;
  private builtBundle: { revision: string; body: Promise<Buffer> } | null = null;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
  ) {}

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

  /** The gzipped bundle of a snapshot, built once per revision. */
  bundle(snapshot: PolicySnapshot): Promise<Buffer> {
    if (this.builtBundle?.revision !== snapshot.revision) {
      this.builtBundle = { revision: snapshot.revision, body: buildBundle(snapshot) };
    }
    return this.builtBundle.body;
  }

  private async reload(): Promise<PolicySnapshot> {
    const fresh = snapshotOf(await loadBundledRecords(this.store));
    const previous = this.latest?.snapshot;
    const snapshot = previous?.revision === fresh.revision ? previous : fresh;
    if (snapshot === fresh) this.announce(fresh, previous?.revision);
    this.latest = { snapshot, loadedAt: Date.now() };
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
