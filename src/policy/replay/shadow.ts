/**
 * Shadow policies: rule and data records written with `mode: "shadow"` make a candidate revision
 * (the live records with each shadow in place of the live record of its path or data key). Every
 * live decision, once answered and recorded in the audit log, is also decided by the candidate,
 * off the request's path: paced (pacer.ts), sampled (POLICY_SHADOW_SAMPLE_RATE), dropped and
 * counted when more wait than POLICY_SHADOW_QUEUE (or when the policy sandbox stops a batch at a
 * limit). Only the live policy decides; the differences are counted (for /metrics) and, with the
 * counts, kept as this process's share in the store (ProcessShares): the Admin API sums every
 * worker's and node's shares, so that each answers the same, and a restart loses none of them.
 */
import type { Logger } from '../../log/index.js';
import { PROCESS_ID, ProcessShares, type Store, type StoredDoc } from '../../store/index.js';
import { snapshotOf, type PolicySnapshot } from '../bundle/build.js';
import { loadPolicyLayers, POLICY_DATA, POLICY_RULES, withShadows } from '../records.js';
import { CHANGE_KINDS, type ChangeKind } from './compare.js';
import {
  changedDecision,
  countsTable,
  compareDecisions,
  ImpactTally,
  type ChangeCounts,
  type ChangedDecision,
  type ImpactResult,
  type RecordedDecision,
} from './impact.js';
import type { Pacer } from './pacer.js';
import type { PolicyReplayer } from './replayer.js';
import { SandboxBusyError, SandboxLimitError } from '../sandbox/index.js';
import { SHADOW_COLLECTION } from '../collections.js';

export interface ShadowOptions {
  store: Store;
  replayer: PolicyReplayer;
  pacer: Pacer;
  log: Logger;
  /** The fraction of live decisions evaluated against the candidate (1: all). */
  sampleRate: number;
  /** Decisions waiting beyond this many are dropped (and counted). */
  maxQueue: number;
  /** The newest differences kept for the Admin API. */
  maxListed: number;
  /** Each decision evaluated against the candidate, with the kind of difference (null: none), for /metrics. */
  onEvaluated?: (point: string, kind: ChangeKind | null) => void;
  /** Each live decision dropped unevaluated (queue full), for /metrics. */
  onDropped?: (count: number) => void;
}

/** A difference between the live decision and the candidate's, and the tenant whose decision it was. */
export interface ShadowDifference extends ChangedDecision {
  tenantId: string | null;
}

/** What the shadow evaluation of every process has seen since the candidate revision came into being. */
export interface ShadowStatus {
  active: boolean;
  /** The candidate revision (null: no shadow records). */
  candidateRevision: string | null;
  /** The revision in force the candidate was built on. */
  liveRevision: string | null;
  /** When a process first evaluated a decision against this candidate. */
  since: string | null;
  evaluated: number;
  dropped: number;
  skipped: number;
  differences: Record<ChangeKind, number>;
}

/** One process's share of a candidate's evaluation: its counts, one tenant's tally, or one listed difference. */
interface ShareKinds {
  status: Omit<ShadowStatus, 'active' | 'candidateRevision'>;
  tally: { replayed: number; byPoint: Record<string, ChangeCounts>; byClient: Record<string, ChangeCounts> };
  difference: ShadowDifference;
}
type ShareOf<K extends keyof ShareKinds> = ShareKinds[K] & {
  id: string;
  share: K;
  candidateRevision: string;
  tenantId: string | null;
  expiresAt: number;
};
type ShadowShare = StoredDoc & ShareOf<keyof ShareKinds>;

/** A candidate's shares outlive it by this much unless it is promoted or discarded (which removes them). */
const SHARE_DAYS_MS = 30 * 24 * 3600_000;

/** The candidate revision is re-read from the store at most this often, as the live policy is. */
const CANDIDATE_MAX_AGE_MS = 1000;
/** Decisions evaluated per paced step. */
const BATCH = 200;

interface Candidate {
  snapshot: PolicySnapshot;
  liveRevision: string;
}

export class ShadowPolicy {
  private queue: RecordedDecision[] = [];
  private draining = false;
  private candidate: { value: Candidate | null; at: number } | null = null;
  private status: ShadowStatus = idle();
  /** Per tenant (its tenantId; '' for the default tenant): decisions evaluated and differences, by point and client. */
  private tallies = new Map<string, ImpactTally>();
  /** Differences this process has listed for the candidate: the slot of the next one in its ring of maxListed. */
  private listedCount = 0;
  private readonly shares: ProcessShares<ShadowShare>;

  constructor(private readonly options: ShadowOptions) {
    this.shares = new ProcessShares(options.store, SHADOW_COLLECTION, options.log);
    // Where the store announces policy writes (PostgreSQL's NOTIFY), a new candidate is looked at at once, not after a second.
    options.store.watch?.([POLICY_RULES.name, POLICY_DATA.name], () => (this.candidate = null));
  }

  /**
   * Live decisions that have been answered and recorded: queued for the candidate, never delaying
   * anyone. `decisions` is asked for only while there may be a candidate (while there is none,
   * known for a second at a time, this costs nothing).
   */
  observe(decisions: () => RecordedDecision[]): void {
    const known = this.candidate;
    if (known && known.value === null && Date.now() - known.at < CANDIDATE_MAX_AGE_MS) return;
    const { sampleRate, maxQueue } = this.options;
    let dropped = 0;
    for (const decision of decisions()) {
      if (sampleRate < 1 && Math.random() >= sampleRate) continue;
      if (this.queue.length >= maxQueue) dropped += 1;
      else this.queue.push(decision);
    }
    if (dropped) this.countDropped(dropped);
    if (this.queue.length && !this.draining) void this.drain();
  }

  /** Every process's counts for the current candidate (read again from the store). */
  async current(): Promise<ShadowStatus> {
    await this.candidateNow(0);
    const revision = this.status.candidateRevision;
    if (revision === null) return { ...this.status, differences: { ...this.status.differences } };
    const shares = await this.sharesOf('status', { candidateRevision: revision });
    const sum: ShadowStatus = {
      ...idle(),
      active: true,
      candidateRevision: revision,
      liveRevision: this.status.liveRevision,
    };
    for (const share of shares) {
      if (sum.since === null || (share.since !== null && share.since < sum.since)) sum.since = share.since;
      sum.evaluated += share.evaluated;
      sum.dropped += share.dropped;
      sum.skipped += share.skipped;
      for (const kind of CHANGE_KINDS) sum.differences[kind] += share.differences[kind] ?? 0;
    }
    return sum;
  }

  /** The newest differences of one tenant's decisions first (every process's), at most `limit`, optionally of one point or client. */
  async differences(
    tenantId: string | null,
    filter: { point?: string; clientId?: string; limit: number },
  ): Promise<ShadowDifference[]> {
    const revision = this.status.candidateRevision;
    if (revision === null) return [];
    const shares = await this.sharesOf('difference', {
      candidateRevision: revision,
      tenantId,
      ...(filter.point === undefined ? {} : { point: filter.point }),
      ...(filter.clientId === undefined ? {} : { clientId: filter.clientId }),
    });
    return shares
      .map(({ id: _id, share: _share, candidateRevision: _revision, expiresAt: _expires, ...difference }) => difference)
      .sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : b.auditId - a.auditId))
      .slice(0, filter.limit);
  }

  /** One tenant's decisions evaluated against the candidate (every process's), and the differences, by point and by client. */
  async summary(tenantId: string | null): Promise<{ evaluated: number; summary: ImpactResult['summary'] }> {
    const revision = this.status.candidateRevision;
    const shares = revision === null ? [] : await this.sharesOf('tally', { candidateRevision: revision, tenantId });
    const summary: ImpactResult['summary'] = { byPoint: countsTable(), byClient: countsTable() };
    let evaluated = 0;
    for (const share of shares) {
      evaluated += share.replayed;
      addCounts(summary.byPoint, share.byPoint);
      addCounts(summary.byClient, share.byClient);
    }
    return { evaluated, summary };
  }

  /** After shadows were promoted or discarded: the candidate is read again and its counts (every process's) start afresh. */
  async forget(): Promise<void> {
    const revision = this.status.candidateRevision;
    this.candidate = null;
    this.queue = [];
    this.restart(null);
    if (revision !== null) await this.shares.remove({ candidateRevision: revision });
  }

  /** Writes this process's shares; for a stopping server, before its store closes. */
  close(): Promise<void> {
    return this.shares.close();
  }

  private async sharesOf<K extends keyof ShareKinds>(
    share: K,
    filter: Record<string, string | null>,
  ): Promise<ShareOf<K>[]> {
    return (await this.shares.read({ share, ...filter })) as unknown as ShareOf<K>[];
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length) {
        const candidate = await this.candidateNow(CANDIDATE_MAX_AGE_MS);
        if (!candidate) {
          this.queue = [];
          break;
        }
        const batch = this.queue.splice(0, BATCH);
        const prepared = await this.options.replayer.prepare(candidate.snapshot);
        const evaluated = await compareDecisions(batch, prepared, null, this.options.pacer).catch((error: unknown) =>
          this.stoppedBySandbox(error, batch.length),
        );
        if (!evaluated) continue;
        const { compared, skipped } = evaluated;
        // A promotion or discard while this batch was evaluated: its results belong to no candidate now.
        if (this.status.candidateRevision !== candidate.snapshot.revision) continue;
        this.status.skipped += skipped.length;
        for (const each of compared) this.tallyOf(each.recorded.tenantId).add({ compared: [each], skipped: [] });
        for (const each of compared) {
          this.status.evaluated += 1;
          this.options.onEvaluated?.(each.recorded.point, each.kind);
          if (each.kind) this.remember({ ...changedDecision(each, each.kind), tenantId: each.recorded.tenantId });
        }
        this.statusChanged();
        await this.options.pacer.step();
      }
    } catch (error) {
      this.options.log.warn({ err: error }, 'shadow policy evaluation failed; the decisions waiting were dropped');
      this.countDropped(this.queue.length);
      this.queue = [];
    } finally {
      this.draining = false;
    }
  }

  /**
   * A batch the policy sandbox stopped (a limit reached, no thread free) is dropped and counted,
   * and the next one is tried; any other error is thrown on (every decision waiting is dropped).
   */
  private stoppedBySandbox(error: unknown, count: number): null {
    if (!(error instanceof SandboxLimitError || error instanceof SandboxBusyError)) throw error;
    this.options.log.warn(
      { reason: error.message, dropped: count },
      'shadow policy evaluation of a batch stopped in the policy sandbox; the batch was dropped',
    );
    this.countDropped(count);
    return null;
  }

  private countDropped(count: number): void {
    this.options.onDropped?.(count);
    this.status.dropped += count;
    this.statusChanged();
  }

  /** This process's counts changed: its status share is written at the next flush. */
  private statusChanged(): void {
    const revision = this.status.candidateRevision;
    if (revision === null) return;
    const status = this.status;
    this.shares.changedShare(`status:${revision}:${PROCESS_ID}`, () => ({
      id: `status:${revision}:${PROCESS_ID}`,
      share: 'status',
      candidateRevision: revision,
      tenantId: null,
      liveRevision: status.liveRevision,
      since: status.since,
      evaluated: status.evaluated,
      dropped: status.dropped,
      skipped: status.skipped,
      differences: { ...status.differences },
      expiresAt: Date.now() + SHARE_DAYS_MS,
    }));
  }

  private tallyOf(tenantId: string | null): ImpactTally {
    const key = tenantId ?? '';
    let tally = this.tallies.get(key);
    if (!tally) this.tallies.set(key, (tally = new ImpactTally(false)));
    const revision = this.status.candidateRevision;
    if (revision !== null) {
      const counted = tally;
      const id = `tally:${revision}:${key}:${PROCESS_ID}`;
      this.shares.changedShare(id, () => {
        const { replayed, summary } = counted.result();
        return {
          id,
          share: 'tally',
          candidateRevision: revision,
          tenantId,
          replayed,
          byPoint: summary.byPoint,
          byClient: summary.byClient,
          expiresAt: Date.now() + SHARE_DAYS_MS,
        };
      });
    }
    return tally;
  }

  /** A difference listed: in this process's ring of the newest maxListed in the store (the oldest is overwritten). */
  private remember(difference: ShadowDifference): void {
    this.status.differences[difference.kind] += 1;
    const revision = this.status.candidateRevision;
    if (revision === null) return;
    const id = `difference:${revision}:${PROCESS_ID}:${this.listedCount++ % this.options.maxListed}`;
    this.shares.changedShare(id, () => ({
      ...difference,
      id,
      share: 'difference',
      candidateRevision: revision,
      expiresAt: Date.now() + SHARE_DAYS_MS,
    }));
  }

  /** The candidate revision (null: no shadow records), read from the store when older than `maxAgeMs`. */
  private async candidateNow(maxAgeMs: number): Promise<Candidate | null> {
    if (this.candidate && Date.now() - this.candidate.at < maxAgeMs) return this.candidate.value;
    const layers = await loadPolicyLayers(this.options.store);
    const value =
      layers.shadow.rules.length + layers.shadow.data.length === 0
        ? null
        : {
            snapshot: snapshotOf(withShadows(layers.live, layers.shadow)),
            liveRevision: snapshotOf(layers.live).revision,
          };
    this.candidate = { value, at: Date.now() };
    if ((value?.snapshot.revision ?? null) !== this.status.candidateRevision) this.restart(value);
    else if (value) this.status.liveRevision = value.liveRevision;
    return value;
  }

  private restart(candidate: Candidate | null): void {
    this.status = {
      ...idle(),
      active: candidate !== null,
      candidateRevision: candidate?.snapshot.revision ?? null,
      liveRevision: candidate?.liveRevision ?? null,
      since: candidate ? new Date().toISOString() : null,
    };
    this.listedCount = 0;
    this.tallies = new Map();
  }
}

function addCounts(sum: Record<string, ChangeCounts>, share: Record<string, ChangeCounts>): void {
  for (const [key, counts] of Object.entries(share)) {
    const total = (sum[key] ??= { ...counts, ...zeroed(counts) });
    for (const [field, value] of Object.entries(counts) as [keyof ChangeCounts, number][]) total[field] += value;
  }
}

function zeroed(counts: ChangeCounts): ChangeCounts {
  return Object.fromEntries(Object.keys(counts).map((field) => [field, 0])) as ChangeCounts;
}

function idle(): ShadowStatus {
  return {
    active: false,
    candidateRevision: null,
    liveRevision: null,
    since: null,
    evaluated: 0,
    dropped: 0,
    skipped: 0,
    differences: Object.fromEntries(CHANGE_KINDS.map((kind) => [kind, 0])) as Record<ChangeKind, number>,
  };
}
