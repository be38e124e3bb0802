/**
 * Decisions the live policy itself could not make (an evaluation error, a malformed decision; not
 * an OPA that is down, which /healthz reports on its own), counted per decision point for
 * /healthz. A point is failing when, within the window, most of its decisions failed that way,
 * or when the live revision fails on one of the decision contract's examples (the probe made
 * once per revision). One caller whose input trips a rule does not make the node unready (every
 * node would be, and the service with them); the point's answers to everyone else still count.
 *
 * Each process counts its own decisions and keeps its windows as its share in the store
 * (ProcessShares, at most a write a second): /healthz sums every worker's and node's, so that all
 * of them report the same faults, whichever got the failing traffic.
 */
import type { Logger } from '../log/index.js';
import { PROCESS_ID, ProcessShares, type Store, type StoredDoc } from '../store/index.js';
import type { DecisionPoint } from './contract/types.js';
import { POLICY_FAULTS_COLLECTION } from './collections.js';

/** One process's windows of every point. */
interface FaultShare extends StoredDoc {
  id: string;
  windows: (PointCounts & { point: DecisionPoint })[];
  expiresAt: number;
}

/** What /healthz says about one failing decision point. */
export interface PolicyFault {
  point: DecisionPoint;
  /** The engine's own error, e.g. OPA's `eval_conflict_error: … (arbiter/token2.rego:3)`. */
  error: string;
  /** The bundle revision that failed. */
  revision: string;
  /** Decisions at the point within the window, and how many of them failed so; null for a probe's finding. */
  decisions: number | null;
  failed: number | null;
  /** When the last one failed. */
  at: string;
  /** True when most of the point's decisions fail (or an example does): the node cannot serve the point. */
  failing: boolean;
}

interface PointCounts {
  revision: string;
  since: number;
  decisions: number;
  failed: number;
  error: string | null;
  at: number;
}

export class PolicyFaults {
  /** The current and the previous window of each point, so that a window's end is no cliff. */
  private readonly current = new Map<DecisionPoint, PointCounts>();
  private readonly previous = new Map<DecisionPoint, PointCounts>();
  /** What the contract examples showed on each revision probed (a bounded few). */
  private readonly probes = new Map<string, Promise<PolicyFault[]>>();

  private readonly shares: ProcessShares<FaultShare> | null;

  /** With a store, the counts are shared by every process on it; without, they are this process's own. */
  constructor(
    private readonly windowMs: number,
    store?: Store,
    log?: Logger,
  ) {
    this.shares = store ? new ProcessShares(store, POLICY_FAULTS_COLLECTION, log) : null;
  }

  /** Counts one decision of `revision` at `point`; `fault` is the policy's error when it could not decide. */
  count(point: DecisionPoint, revision: string, fault: string | null): void {
    const now = Date.now();
    let counts = this.current.get(point);
    if (counts && (counts.revision !== revision || now - counts.since >= this.windowMs)) {
      if (counts.revision === revision) this.previous.set(point, counts);
      else this.previous.delete(point);
      counts = undefined;
    }
    counts ??= { revision, since: now, decisions: 0, failed: 0, error: null, at: 0 };
    this.current.set(point, counts);
    counts.decisions += 1;
    if (fault !== null) {
      counts.failed += 1;
      counts.error = fault;
      counts.at = now;
    }
    this.shares?.changedShare(`faults:${PROCESS_ID}`, () => this.share());
  }

  /** Writes this process's counts; for a stopping server, before its store closes. */
  async close(): Promise<void> {
    await this.shares?.close();
  }

  private share(): FaultShare {
    const windows = [...this.current, ...this.previous].map(([point, counts]) => ({ point, ...counts }));
    return { id: `faults:${PROCESS_ID}`, windows, expiresAt: Date.now() + 2 * this.windowMs };
  }

  /**
   * The contract examples' finding on `revision`, made once by `probe` (OPA's answers to every
   * example), then remembered; a probe that could not ask (it rejects) is made again next time.
   */
  probed(revision: string, probe: () => Promise<PolicyFault[]>): Promise<PolicyFault[]> {
    let finding = this.probes.get(revision);
    if (!finding) {
      if (this.probes.size >= 8) this.probes.delete(this.probes.keys().next().value!);
      finding = probe().catch(() => {
        this.probes.delete(revision);
        return [];
      });
      this.probes.set(revision, finding);
    }
    return finding;
  }

  /** The points whose decisions of these revisions failed within the window, counted by every process sharing the store. */
  async recent(revisions: (string | null)[]): Promise<PolicyFault[]> {
    const now = Date.now();
    const windows = this.shares
      ? (await this.shares.read({})).flatMap((share) => share.windows)
      : [...this.current, ...this.previous].map(([point, counts]) => ({ point, ...counts }));
    const byPoint = new Map<DecisionPoint, PointCounts[]>();
    for (const { point, ...window } of windows) {
      if (!revisions.includes(window.revision) || now - window.since >= 2 * this.windowMs) continue;
      byPoint.set(point, [...(byPoint.get(point) ?? []), window]);
    }
    const faults: PolicyFault[] = [];
    for (const [point, counted] of byPoint) {
      const failed = counted.reduce((sum, window) => sum + window.failed, 0);
      if (failed === 0) continue;
      const decisions = counted.reduce((sum, window) => sum + window.decisions, 0);
      // A window that counted a failure keeps its error (count): one at least is found.
      const last = counted.filter((window) => window.error !== null).sort((a, b) => b.at - a.at)[0]!;
      faults.push({
        point,
        error: last.error!,
        revision: last.revision,
        decisions,
        failed,
        at: new Date(last.at).toISOString(),
        failing: failed * 2 > decisions,
      });
    }
    return faults;
  }
}
