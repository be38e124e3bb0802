/**
 * Shadow policies: rule and data records written with `mode: "shadow"` make a candidate revision
 * (the live records with each shadow in place of the live record of its path or data key). Every
 * live decision, once answered and recorded in the audit log, is also decided by the candidate,
 * off the request's path: paced (pacer.ts), sampled (POLICY_SHADOW_SAMPLE_RATE), dropped and
 * counted when more wait than POLICY_SHADOW_QUEUE (or when the policy sandbox stops a batch at a
 * limit). Only the live policy decides; the differences
 * are counted (for /metrics) and the newest kept in memory, per node, for the Admin API.
 */
import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import { snapshotOf, type PolicySnapshot } from '../bundle/build.js';
import { loadPolicyLayers, POLICY_DATA, POLICY_RULES, withShadows } from '../records.js';
import { CHANGE_KINDS, type ChangeKind } from './compare.js';
import {
  changedDecision,
  compareDecisions,
  ImpactTally,
  type ChangedDecision,
  type ImpactResult,
  type RecordedDecision,
} from './impact.js';
import type { Pacer } from './pacer.js';
import type { PolicyReplayer } from './replayer.js';
import { SandboxBusyError, SandboxLimitError } from '../sandbox/index.js';

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

/** What the shadow evaluation of this node has seen since the candidate revision came into being. */
export interface ShadowStatus {
  active: boolean;
  /** The candidate revision (null: no shadow records). */
  candidateRevision: string | null;
  /** The revision in force the candidate was built on. */
  liveRevision: string | null;
  /** When this node first evaluated a decision against this candidate. */
  since: string | null;
  evaluated: number;
  dropped: number;
  skipped: number;
  differences: Record<ChangeKind, number>;
}

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
  /** The newest differences last (at most maxListed in all). */
  private listed: ShadowDifference[] = [];
  /** Per tenant (its tenantId; '' for the default tenant): decisions evaluated and differences, by point and client. */
  private tallies = new Map<string, ImpactTally>();

  constructor(private readonly options: ShadowOptions) {
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
    if (dropped) {
      this.status.dropped += dropped;
      this.options.onDropped?.(dropped);
    }
    if (this.queue.length && !this.draining) void this.drain();
  }

  /** This node's counts for the current candidate (read again from the store). */
  async current(): Promise<ShadowStatus> {
    await this.candidateNow(0);
    return { ...this.status, differences: { ...this.status.differences } };
  }

  /** The newest differences of one tenant's decisions first, at most `limit`, optionally of one point or client. */
  differences(
    tenantId: string | null,
    filter: { point?: string; clientId?: string; limit: number },
  ): ShadowDifference[] {
    return this.listed
      .filter(
        (difference) =>
          difference.tenantId === tenantId &&
          (filter.point === undefined || difference.point === filter.point) &&
          (filter.clientId === undefined || difference.clientId === filter.clientId),
      )
      .slice(-filter.limit)
      .reverse();
  }

  /** One tenant's decisions evaluated against the candidate, and the differences, by point and by client. */
  summary(tenantId: string | null): { evaluated: number; summary: ImpactResult['summary'] } {
    const result = (this.tallies.get(tenantId ?? '') ?? new ImpactTally(false)).result();
    return { evaluated: result.replayed, summary: result.summary };
  }

  /** After shadows were promoted or discarded: the candidate is read again and its counts start afresh. */
  forget(): void {
    this.candidate = null;
    this.queue = [];
    this.restart(null);
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
        await this.options.pacer.step();
      }
    } catch (error) {
      this.options.log.warn({ err: error }, 'shadow policy evaluation failed; the decisions waiting were dropped');
      this.options.onDropped?.(this.queue.length);
      this.status.dropped += this.queue.length;
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
    this.options.onDropped?.(count);
    this.status.dropped += count;
    return null;
  }

  private tallyOf(tenantId: string | null): ImpactTally {
    const key = tenantId ?? '';
    let tally = this.tallies.get(key);
    if (!tally) this.tallies.set(key, (tally = new ImpactTally(false)));
    return tally;
  }

  private remember(difference: ShadowDifference): void {
    this.status.differences[difference.kind] += 1;
    this.listed.push(difference);
    if (this.listed.length > this.options.maxListed) this.listed.splice(0, this.listed.length - this.options.maxListed);
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
    this.listed = [];
    this.tallies = new Map();
  }
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
