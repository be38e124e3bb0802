/**
 * A Rego decision as Arbiter takes it, whoever made it (the OPA sidecar, driver.ts, or the module
 * compiled to Wasm, compiled.ts). A module of its own so that a decision thread, which evaluates
 * and never calls OPA, loads neither the HTTP client nor the sidecar's driver.
 */
import { checkResult } from '../contract/result-check.js';
import type { Decision, DecisionPoint } from '../contract/types.js';

/** What OPA said about one decision: a decision, nothing (undefined), or a failure to answer. */
export type RegoVerdict = (
  | { kind: 'decided'; decision: Decision }
  | { kind: 'undefined' }
  /** `policyFault`: the policy itself could not decide (an evaluation error, a malformed decision), OPA being up. */
  | {
      kind: 'failed';
      reason: string;
      policyFault?: true;
      /** What the caller is told instead of the generic "could not decide" (a decision past its time names the point and the limit). */
      description?: string;
    }
) & {
  /** Made by the bundle compiled to Wasm in this process rather than by the OPA sidecar. */
  inProcess?: true;
};

/** A decision document OPA returned: decided, or failed when it does not fit the result schema. */
export function resultVerdict(point: DecisionPoint, result: unknown): RegoVerdict {
  const problem = checkResult(result);
  if (problem)
    return {
      kind: 'failed',
      reason: `malformed decision from data.arbiter.${point}.decision: ${problem}`,
      policyFault: true,
    };
  return { kind: 'decided', decision: result as Decision };
}
