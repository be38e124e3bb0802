/**
 * Knowing a policy change before it is in force: impact analysis (recorded decisions replayed
 * against the bundle a proposed change would make) and shadow policies (a candidate revision every
 * live decision is also evaluated against). Both build their candidate with the checks a write
 * makes (bundle/validate.ts) and decide with the engines that decide live (replayer.ts).
 */
import type { Config } from '../../config/index.js';
import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import { snapshotOf, type PolicySnapshot } from '../bundle/build.js';
import type { TrialInput } from '../bundle/trial.js';
import { tryBundleWith, type RecordChange, type TriedBundle } from '../bundle/validate.js';
import { resolveOpaBinary } from '../opa/binary.js';
import { loadPolicyLayers, type BundledRecords } from '../records.js';
import type { ChangeKind } from './compare.js';
import { compareDecisions, replayImpact, type Compared, type ImpactResult, type RecordedDecision } from './impact.js';
import { Pacer } from './pacer.js';
import { PolicyReplayer } from './replayer.js';
import { configurePolicySandbox } from '../sandbox/index.js';
import { ShadowPolicy } from './shadow.js';

export interface PolicyLabOptions {
  config: Pick<
    Config,
    | 'opaBin'
    | 'policyShadowSampleRate'
    | 'policyShadowQueue'
    | 'policyReplayShare'
    | 'policySandboxTimeoutMs'
    | 'policySandboxMemoryMb'
    | 'policySandboxThreads'
  >;
  store: Store;
  log: Logger;
  /** The requests being answered now (the composition root's count): a replay paces itself while there are others. */
  requestsInFlight?: () => number;
  /** For /metrics: each live decision evaluated against the shadow candidate, and those dropped. */
  onShadowEvaluated?: (point: string, kind: ChangeKind | null) => void;
  onShadowDropped?: (count: number) => void;
}

/** The newest shadow differences each process keeps in the store for the Admin API. */
const LISTED_SHADOW_DIFFERENCES = 1000;

export class PolicyLab {
  readonly shadow: ShadowPolicy;
  private readonly replayer: PolicyReplayer;
  private readonly opaBinary: string;
  /** One replay at a time on a node: a second waits for the first, so that two cannot take twice the share. */
  private replaying: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: PolicyLabOptions) {
    const { config, log } = options;
    // The process's sandbox evaluates what this lab, rule validation and trial runs submit: its limits are the server's.
    configurePolicySandbox(config);
    this.opaBinary = resolveOpaBinary(config.opaBin);
    this.replayer = new PolicyReplayer(this.opaBinary, log.child({ component: 'policy-replay' }));
    this.shadow = new ShadowPolicy({
      store: options.store,
      replayer: this.replayer,
      pacer: new Pacer(config.policyReplayShare, () => this.requestsInFlight() > 0),
      log: log.child({ component: 'policy-shadow' }),
      sampleRate: config.policyShadowSampleRate,
      maxQueue: config.policyShadowQueue,
      maxListed: LISTED_SHADOW_DIFFERENCES,
      onEvaluated: options.onShadowEvaluated,
      onDropped: options.onShadowDropped,
    });
  }

  private requestsInFlight(): number {
    // Unknown (a lab without the count): as if always busy, the careful side.
    return this.options.requestsInFlight?.() ?? Number.POSITIVE_INFINITY;
  }

  /** The bundle the changes would make of the live records, checked as one write is; or the refusal's message. */
  tryChanges(changes: RecordChange[], recordedInputs?: () => Promise<TrialInput[]>): Promise<TriedBundle> {
    return tryBundleWith(this.opaBinary, this.options.store, changes, { layer: 'live', recordedInputs });
  }

  /** The bundle in force as the store holds it now, and the shadow records (their path and data key under their own names). */
  async layers(): Promise<{ live: PolicySnapshot; shadow: BundledRecords }> {
    const layers = await loadPolicyLayers(this.options.store);
    return { live: snapshotOf(layers.live), shadow: layers.shadow };
  }

  /**
   * The recorded decisions (pages, newest first) replayed against `live` and `candidate`: the ones
   * whose outcome differs, and a summary. Compiling a revision not seen before takes about a second.
   */
  async impact(
    live: PolicySnapshot,
    candidate: PolicySnapshot,
    pages: AsyncIterable<RecordedDecision[]>,
  ): Promise<ImpactResult> {
    const run = this.replaying.then(async () => {
      const [before, after] = await Promise.all([this.replayer.prepare(live), this.replayer.prepare(candidate)]);
      // The impact request itself is one of the requests in flight.
      const pacer = new Pacer(this.options.config.policyReplayShare, () => this.requestsInFlight() > 1);
      return replayImpact(pages, before, after, pacer);
    });
    this.replaying = run.catch(() => undefined);
    return run;
  }

  /**
   * The recorded decisions (pages) decided again by `current` (the policy in force) and compared
   * with themselves as recorded: those whose outcome the policy now changes (events from policy,
   * src/signals). Paced and one at a time on a node, as a replay is.
   */
  async redecide(current: PolicySnapshot, pages: AsyncIterable<RecordedDecision[]>): Promise<Compared[]> {
    const run = this.replaying.then(async () => {
      const policy = await this.replayer.prepare(current);
      const pacer = new Pacer(this.options.config.policyReplayShare, () => this.requestsInFlight() > 0);
      const changed: Compared[] = [];
      for await (const page of pages) {
        await pacer.step();
        const { compared } = await compareDecisions(page, policy, null, pacer);
        changed.push(...compared.filter((each) => each.kind !== null));
      }
      return changed;
    });
    this.replaying = run.catch(() => undefined);
    return run;
  }
}
