import type { CedarVerdict } from './cedar/driver.js';
import { combine } from './combine.js';
import type { Decision, DecisionInput, DecisionPoint, EngineVerdict } from './contract/types.js';
import type { RegoVerdict } from './opa/verdict.js';

/** A decision as the endpoints make it, with each engine's verdict and why (the Admin decision playground). */
export interface DecisionExplanation {
  point: DecisionPoint;
  decision: Decision;
  engineError?: string;
  engines: {
    rego: { verdict: EngineVerdict; reason?: string; rules: RuleHit[]; trace: string[] };
    cedar: { verdict: EngineVerdict; reason?: string; policies: { id: string; text: string }[]; errors: string[] };
  };
}

/** A Rego rule whose body succeeded while OPA evaluated the decision: the rules that made the result. */
export interface RuleHit {
  rule: string;
  location: string;
}

/** OPA's trace can be long; the playground shows its start, the rules list is taken from all of it. */
const MAX_TRACE_LINES = 1000;

/** Cedar's verdict on an explained input, and the text of the policies that determined it. */
export interface CedarExplanation {
  verdict: CedarVerdict;
  texts: { id: string; text: string }[];
}

export function explanationOf(
  point: DecisionPoint,
  input: DecisionInput,
  rego: { verdict: RegoVerdict; trace: string[] },
  cedar: CedarExplanation,
): DecisionExplanation {
  const { verdict: cedarVerdict } = cedar;
  const outcome = combine(point, input, rego.verdict, cedarVerdict);
  return {
    point,
    decision: outcome.decision,
    ...(outcome.engineError ? { engineError: outcome.engineError } : {}),
    engines: {
      rego: {
        verdict: outcome.engines?.rego ?? 'error',
        ...(rego.verdict.kind === 'failed'
          ? { reason: rego.verdict.reason }
          : rego.verdict.kind === 'undefined'
            ? { reason: `data.arbiter.${point}.decision is undefined for this input` }
            : {}),
        rules: rulesThatSucceeded(rego.trace),
        trace: rego.trace.slice(0, MAX_TRACE_LINES),
      },
      cedar: {
        verdict: outcome.engines?.cedar ?? 'error',
        ...(cedarVerdict.kind === 'failed'
          ? { reason: cedarVerdict.reason }
          : cedarVerdict.kind === 'none'
            ? { reason: 'no Cedar policy covers this action' }
            : {}),
        policies: cedar.texts,
        errors: cedarVerdict.kind === 'decided' ? cedarVerdict.evaluationErrors : [],
      },
    },
  };
}

/**
 * The rules whose evaluation exited successfully, from OPA's pretty trace lines
 * (`rules/token.rego:12   | | Exit data.arbiter.token.decision`), in the order they finished,
 * each rule and location once. Lines of the query itself (`query:1`) are not rules.
 */
export function rulesThatSucceeded(trace: string[]): RuleHit[] {
  const hits = new Map<string, RuleHit>();
  for (const line of trace) {
    const [, location, rule] = /^(\S+:\d+)\s+[| ]*Exit (data\.\S+)/.exec(line) ?? [];
    if (location === undefined || rule === undefined || location.startsWith('query:')) continue;
    const hit = { rule, location };
    hits.set(`${hit.rule} ${hit.location}`, hit);
  }
  return [...hits.values()];
}
