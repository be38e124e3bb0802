/**
 * Rego and Cedar together. An engine "applies" when it has a policy for the request (Rego: the
 * decision document is defined; Cedar: some policy's action scope covers the action).
 * - Either engine failing → fail closed (deny, engineError), whatever the other said.
 * - Both apply → allow only if both allow (a deny from either wins); output claims come from
 *   Rego, plus the obligations/extensions annotated on the determining Cedar permits that Rego
 *   left unset: a Cedar permit only adds, so it never undoes what Rego withheld or required
 *   (`issue_refresh_token: false`, `dpop_required: true`).
 * - One applies → its decision.
 * - Neither → no decision: fail closed with engineError.
 */
import {
  ENGINE_FAILURE_ERROR,
  type Decision,
  type DecisionInput,
  type DecisionOutcome,
  type DecisionPoint,
  type EngineVerdict,
} from './contract/types.js';
import type { CedarOutputs, CedarVerdict } from './cedar/driver.js';
import type { RegoVerdict } from './opa/verdict.js';

export function combine(
  point: DecisionPoint,
  input: DecisionInput,
  rego: RegoVerdict,
  cedarVerdict: CedarVerdict,
): DecisionOutcome {
  const engines = {
    rego: regoSummary(rego),
    regoEvaluator: rego.inProcess ? ('in-process' as const) : ('opa' as const),
    cedar: cedarSummary(cedarVerdict),
    ...(cedarVerdict.kind === 'decided' && cedarVerdict.policies.length
      ? { cedarPolicies: cedarVerdict.policies }
      : {}),
  };
  const failure = rego.kind === 'failed' ? rego.reason : cedarVerdict.kind === 'failed' ? cedarVerdict.reason : null;
  const description = rego.kind === 'failed' ? rego.description : undefined;
  if (failure) return { ...failClosed(point, input, failure, description), engines };
  const decision = decisionOf(rego, cedarVerdict);
  if (!decision)
    return {
      ...failClosed(
        point,
        input,
        `no policy decision for ${point} (data.arbiter.${point}.decision is undefined and no Cedar policy applies)`,
      ),
      engines,
    };
  return { point, decision, input, engines };
}

export function failClosed(
  point: DecisionPoint,
  input: DecisionInput,
  reason: string,
  description = 'the policy engine could not decide this request; try again later',
): DecisionOutcome {
  return {
    point,
    decision: {
      allow: false,
      error: ENGINE_FAILURE_ERROR,
      error_description: description,
    },
    input,
    engineError: reason,
  };
}

function decisionOf(rego: RegoVerdict, cedarVerdict: CedarVerdict): Decision | null {
  const cedarDecided = cedarVerdict.kind === 'decided' ? cedarVerdict : null;
  if (rego.kind !== 'decided') return cedarDecided ? cedarDecision(cedarDecided.allow, cedarDecided.outputs) : null;
  if (!cedarDecided) return rego.decision;
  if (!rego.decision.allow) return rego.decision;
  if (!cedarDecided.allow) return cedarDecision(false, cedarDecided.outputs);
  return withCedarOutputs(rego.decision, cedarDecided.outputs);
}

function cedarDecision(allow: boolean, outputs: CedarOutputs): Decision {
  if (!allow) return { allow: false, error: outputs.error, error_description: outputs.error_description };
  return withCedarOutputs({ allow: true }, outputs);
}

/** The Cedar permits' obligations and extensions added to a decision: those it sets already stay as they are. */
function withCedarOutputs(decision: Decision, outputs: CedarOutputs): Decision {
  const merged: Decision = { ...decision };
  if (Object.keys(outputs.obligations).length) merged.obligations = { ...outputs.obligations, ...decision.obligations };
  if (Object.keys(outputs.extensions).length) merged.extensions = { ...outputs.extensions, ...decision.extensions };
  return merged;
}

function regoSummary(verdict: RegoVerdict): EngineVerdict {
  if (verdict.kind === 'failed') return 'error';
  if (verdict.kind === 'undefined') return 'none';
  return verdict.decision.allow ? 'allow' : 'deny';
}

function cedarSummary(verdict: CedarVerdict): EngineVerdict {
  if (verdict.kind === 'failed') return 'error';
  if (verdict.kind === 'none') return 'none';
  return verdict.allow ? 'allow' : 'deny';
}
