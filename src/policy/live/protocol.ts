/**
 * What the live engine and its decision threads say to each other, and the one evaluation both
 * make: a decision evaluated on the event loop and one evaluated in a thread go through
 * `evaluateBoth`, so that their verdicts are the same.
 */
import type { PolicySnapshot } from '../bundle/build.js';
import type { CedarDriver, CedarVerdict } from '../cedar/driver.js';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import type { RegoVerdict } from '../opa/verdict.js';
import type { CompiledRego } from '../opa/compiled.js';

/** One revision as a thread needs it: the snapshot (Cedar's rules and everyone's data) and the compiled Rego, if any. */
export interface RevisionPayload {
  /** What the thread holds it by (the revision, marked when its Rego is compiled). */
  key: string;
  snapshot: PolicySnapshot;
  /** The revision's Rego compiled to Wasm; absent: Rego of this revision is OPA's to decide. */
  wasm?: Uint8Array;
  points?: DecisionPoint[];
}

export interface ThreadJob {
  id: number;
  /** The RevisionPayload's key. */
  revision: string;
  point: DecisionPoint;
  inputs: DecisionInput[];
  /** Sent with the first job of a revision on each thread. */
  load?: RevisionPayload;
}

/** In-process verdicts of one input: `rego` null when OPA must decide (not compiled, or the module stopped). */
export interface LiveVerdicts {
  rego: RegoVerdict | null;
  cedar: CedarVerdict;
}

/** One input decided (`index` in its job) and how long that took. */
export interface ItemReply extends LiveVerdicts {
  id: number;
  index: number;
  ms: number;
  /** Why the compiled module stopped, for the log (the decision then goes to OPA). */
  stopped?: string;
}

export type ThreadReply = { ready: true } | ItemReply | { id: number; error: string };

export function evaluateBoth(
  rego: CompiledRego | null,
  cedar: CedarDriver,
  snapshot: PolicySnapshot,
  point: DecisionPoint,
  input: DecisionInput,
  /** The input's JSON when the caller has it already (the module then reads it as it is). */
  text?: string,
): LiveVerdicts {
  return { rego: rego?.evaluate(point, input, text) ?? null, cedar: cedar.evaluate(snapshot, point, input) };
}
