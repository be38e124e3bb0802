/**
 * Every live decision bounded in time, in process too. Rego compiled to Wasm and Cedar evaluate
 * synchronously, and a synchronous evaluation cannot be stopped from its own thread: one that
 * runs long stalls every request of the process, probes included. So a decision is evaluated on
 * the event loop only while it is proven cheap, and everything else in a decision thread
 * (pool.ts), which is ended when the decision runs past POLICY_DECISION_TIMEOUT_MS.
 *
 * "Proven cheap" is tracked per revision, point, tenant, client and input size class (a power of two of
 * its JSON length, so that a caller's larger input is measured anew): the first decision of such
 * a key is made in a thread and timed there; at most CHEAP_MS, the key's next decisions run on the
 * event loop, where each is timed again and the key goes back to the threads once one takes
 * longer. A key whose decision ran out of time fails closed at once for a while
 * (OVER_BUDGET_PAUSE_MS) instead of taking a thread for the whole budget on every request.
 * Until the first thread has started (a fraction of a second after the engine), a key not yet
 * measured has its Rego decided by OPA, with its own timeout; Cedar is then evaluated here.
 */
import { LRUCache } from 'lru-cache';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../log/index.js';
import type { PolicySnapshot } from '../bundle/build.js';
import { cedarCompileBytes, type CedarDriver } from '../cedar/driver.js';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import type { CompiledRego } from '../opa/compiled.js';
import type { RegoVerdict } from '../opa/verdict.js';
import { threadModule } from '../../config/index.js';
import { DecisionThreads, type JobOutcome, type ThreadEntry } from './pool.js';
import { evaluateBoth, type LiveVerdicts, type RevisionPayload } from './protocol.js';

/** An evaluation on the event loop may take this long; a key that takes longer moves to the threads. */
export const CHEAP_MS = 2;

/**
 * The event loop compiles a revision's Cedar set when it first decides there, unmeasured by the
 * keys' timing: only a set this small (its rules and entity data, cedarCompileBytes) is; a larger
 * one is decided in the threads only, each of which compiles it within its first decision of the
 * revision.
 */
const CEDAR_LOOP_COMPILE_MAX_BYTES = 16 * 1024;

/** How long a key whose decision ran out of time fails closed without being evaluated. */
export const OVER_BUDGET_PAUSE_MS = 10_000;

/** One call's evaluations on the event loop (a batch's) take at most this many CHEAP_MS; the rest go to a thread. */
const LOOP_SLICE = 5;

/**
 * Keys remembered per revision; beyond, the least recently used is forgotten (and measured again
 * in a thread when it comes back). Found 2026-11-29: the whole map was dropped once full, so with
 * more active keys than this (10,000 clients, or 1,000 tenants of 10) every decision went to a
 * thread: 28 % fewer requests a second.
 */
const MAX_KEYS = 10_000;

type Cost = { cheap: boolean } | { pausedUntil: number };
type CostKeys = LRUCache<string, Cost>;

export interface LiveDecisionsOptions {
  /** POLICY_DECISION_TIMEOUT_MS. */
  budgetMs: number;
  /** The engine's Cedar driver (its compiled set is shared with explanations). */
  cedar: CedarDriver;
  log: Logger;
  threads?: number;
  /** POLICY_DECISION_MEMORY_MB: a decision thread's heap and Wasm memory. */
  memoryMb?: number;
  /** How a thread is started; default thread.ts (or .js) beside this file. */
  entry?: ThreadEntry;
  /** Cost keys remembered per revision (default MAX_KEYS). */
  maxKeys?: number;
}

export class LiveDecisions {
  private readonly threads: DecisionThreads;
  private costs: { revision: string; keys: CostKeys };
  /** Whether the event loop may compile the Cedar set of `revision` (cedarFitsLoop), worked out once per revision. */
  private cedarSize = { revision: '', small: true };

  constructor(private readonly options: LiveDecisionsOptions) {
    this.costs = { revision: '', keys: this.costKeys() };
    this.threads = new DecisionThreads(
      options.entry ?? { ...threadEntry(), ...(options.memoryMb ? { memoryMb: options.memoryMb } : {}) },
      options.threads ?? DECISION_THREADS,
      (error) => options.log.error({ err: error }, 'a policy decision thread failed'),
    );
    this.threads.warm();
  }

  /**
   * The in-process verdicts of each input by `deadlineAt` (`rego` null: OPA is to decide, with
   * the time left). A decision that cannot be made in time is a failed Rego verdict that names
   * the point and the limit.
   */
  async evaluate(
    snapshot: PolicySnapshot,
    compiled: CompiledRego | null,
    point: DecisionPoint,
    inputs: DecisionInput[],
    deadlineAt: number,
  ): Promise<LiveVerdicts[]> {
    const keys = this.keysOf(snapshot.revision);
    const verdicts: (LiveVerdicts | null)[] = inputs.map(() => null);
    const offLoop: number[] = [];
    const started = performance.now();
    for (const [index, input] of inputs.entries()) {
      // Serialized once: its length sorts the input by size, and the module reads the same text.
      const text = JSON.stringify(input);
      const key = costKey(point, input, text.length);
      const cost = keys.get(key);
      // A batch of cheap decisions is cheap only up to a point: the rest of a long one goes to a thread.
      const loopFree = performance.now() - started < CHEAP_MS * LOOP_SLICE;
      if (cost && 'pausedUntil' in cost && cost.pausedUntil > Date.now())
        verdicts[index] = this.overBudget(point, 'it ran out of time moments ago and is refused for a while', true);
      else if (cost && 'cheap' in cost && cost.cheap && loopFree && this.cedarFitsLoop(snapshot))
        verdicts[index] = this.onLoop(keys, key, compiled, snapshot, point, input, text);
      else if (!cost && !this.threads.started)
        // No thread has started yet (the first moments of the process): OPA decides, bounded by the time left.
        verdicts[index] = evaluateBoth(null, this.options.cedar, snapshot, point, input);
      else offLoop.push(index);
    }
    if (offLoop.length) {
      const payload = () => payloadOf(snapshot, compiled);
      const outcome = await this.threads.run(
        loadKeyOf(snapshot, compiled),
        payload,
        point,
        offLoop.map((index) => inputs[index]!),
        deadlineAt,
      );
      this.settle(keys, compiled, point, offLoop, inputs, outcome, verdicts);
    }
    return verdicts as LiveVerdicts[];
  }

  /** Whether the event loop may evaluate the revision's Cedar: compiled there already, or small enough to be. */
  private cedarFitsLoop(snapshot: PolicySnapshot): boolean {
    if (this.cedarSize.revision !== snapshot.revision)
      this.cedarSize = {
        revision: snapshot.revision,
        small: cedarCompileBytes(snapshot) <= CEDAR_LOOP_COMPILE_MAX_BYTES,
      };
    return this.cedarSize.small || this.options.cedar.holds(snapshot.revision);
  }

  /** True once a decision thread has started: before, in-process Rego is left to OPA (the engine's choice). */
  get started(): boolean {
    return this.threads.started;
  }

  close(): Promise<void> {
    return this.threads.close();
  }

  private onLoop(
    keys: CostKeys,
    key: string,
    compiled: CompiledRego | null,
    snapshot: PolicySnapshot,
    point: DecisionPoint,
    input: DecisionInput,
    text: string,
  ): LiveVerdicts {
    const started = performance.now();
    const verdicts = evaluateBoth(compiled, this.options.cedar, snapshot, point, input, text);
    const ms = performance.now() - started;
    if (ms > CHEAP_MS) {
      keys.set(key, { cheap: false });
      this.options.log.info(
        { point, client: clientOf(input), ms: Math.round(ms), revision: snapshot.revision },
        'a policy decision took long on the event loop: its next ones are evaluated in a decision thread',
      );
    }
    return verdicts;
  }

  /** Records what the thread measured, and turns what it could not decide in time into failed verdicts. */
  private settle(
    keys: CostKeys,
    compiled: CompiledRego | null,
    point: DecisionPoint,
    indexes: number[],
    inputs: DecisionInput[],
    outcome: JobOutcome,
    verdicts: (LiveVerdicts | null)[],
  ): void {
    // An item's index is its input's place in the job (indexes), each an index of inputs.
    for (const item of outcome.items) {
      const index = indexes[item.index]!;
      const input = inputs[index]!;
      keys.set(costKey(point, input, JSON.stringify(input).length), { cheap: item.ms <= CHEAP_MS });
      if (item.stopped) compiled?.stopped(point, item.stopped);
      verdicts[index] = { rego: item.rego, cedar: item.cedar };
    }
    const { failure } = outcome;
    if (!failure) return;
    for (const index of indexes.slice(outcome.items.length)) {
      const culprit = failure.running && index === indexes[outcome.items.length];
      if (culprit) {
        const input = inputs[index]!;
        keys.set(costKey(point, input, JSON.stringify(input).length), {
          pausedUntil: Date.now() + OVER_BUDGET_PAUSE_MS,
        });
        this.options.log.warn(
          { point, client: clientOf(input), limitMs: this.options.budgetMs },
          'a policy decision ran past POLICY_DECISION_TIMEOUT_MS: it failed closed and its thread was replaced',
        );
      }
      verdicts[index] = failure.overBudget
        ? this.overBudget(point, culprit ? failure.reason : 'another decision of its batch ran out of time', culprit)
        : { rego: { kind: 'failed', reason: failure.reason }, cedar: { kind: 'none' } };
    }
  }

  private overBudget(point: DecisionPoint, why: string, policyFault: boolean): LiveVerdicts {
    return { rego: overBudgetVerdict(point, this.options.budgetMs, why, policyFault), cedar: { kind: 'none' } };
  }

  /** The cost keys of this revision: a new revision starts with none (its costs are measured anew). */
  private keysOf(revision: string): CostKeys {
    if (this.costs.revision !== revision) this.costs = { revision, keys: this.costKeys() };
    return this.costs.keys;
  }

  private costKeys(): CostKeys {
    return new LRUCache<string, Cost>({ max: this.options.maxKeys ?? MAX_KEYS });
  }
}

/** A decision that did not complete within the budget: a failure that names the point and the limit. */
export function overBudgetVerdict(
  point: DecisionPoint,
  budgetMs: number,
  why: string,
  policyFault = false,
): RegoVerdict {
  return {
    kind: 'failed',
    reason: `the ${point} decision did not complete within POLICY_DECISION_TIMEOUT_MS (${budgetMs} ms): ${why}`,
    description: `the ${point} policy decision did not complete within ${budgetMs} ms; try again later`,
    ...(policyFault ? { policyFault: true as const } : {}),
  };
}

/**
 * Threads per process at most: one may be held by a costly decision up to the budget while the
 * other serves the rest (the second is started when the first is busy, and let go once idle).
 */
const DECISION_THREADS = 2;

/** What a decision's cost is kept by: its point, tenant, client and the size class of its input (`length`: of its JSON). */
function costKey(point: DecisionPoint, input: DecisionInput, length: number): string {
  const sizeClass = Math.ceil(Math.log2(length));
  return `${point}\u0000${String(input.tenant)}\u0000${clientOf(input) ?? ''}\u0000${sizeClass}`;
}

function clientOf(input: DecisionInput): string | undefined {
  return (input.client as { client_id?: string } | null | undefined)?.client_id;
}

/** What a thread holds a revision by: without and with its compiled Rego (compiled moments after it is first seen). */
function loadKeyOf(snapshot: PolicySnapshot, compiled: CompiledRego | null): string {
  return compiled?.wasm ? `${snapshot.revision}+rego` : snapshot.revision;
}

function payloadOf(snapshot: PolicySnapshot, compiled: CompiledRego | null): RevisionPayload {
  const key = loadKeyOf(snapshot, compiled);
  // A thread decides from the merged data and the rules: the data entries (the same values again)
  // would double what each load clones on the event loop (found 2026-11-29: 100 ms a load at 3.6 MB).
  const decided: PolicySnapshot = { ...snapshot, data: [], skipped: [] };
  return compiled?.wasm
    ? { key, snapshot: decided, wasm: compiled.wasm, points: [...compiled.points] }
    : { key, snapshot: decided };
}

/** thread.ts (or .js) beside this file: thread-module.ts. */
function threadEntry(): ThreadEntry {
  return threadModule(import.meta.url, 'thread');
}
