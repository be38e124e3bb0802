import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import { buildBundle, snapshotOf, type PolicySnapshot } from './build.js';
import { loadBundledRecords } from '../records.js';
import { OpaNotFoundError, resolveOpaBinary } from '../opa/binary.js';
import { sandboxProblem } from './validate.js';

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
    private readonly opaBinary = resolveOpaBinary(null),
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
