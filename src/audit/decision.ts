import { splitShared, type DecisionOutcome } from '../policy/index.js';
import type { AuditState } from './facts.js';

/**
 * Tells the request's audit entry which decision(s) it asked for: the input, what each engine
 * said (and why none could), the decision point (for a replay), and the outcome. A request that
 * asks several questions (one per UMA permission) records them all, in order.
 */
export function recordDecision(state: AuditState, ...outcomes: DecisionOutcome[]): void {
  const { audit } = state;
  const [first] = outcomes;
  if (!audit || !first) return;
  const decisions = outcomes.map((outcome) => ({
    ...outcome.decision,
    point: outcome.point,
    ...(outcome.engines ? { engines: outcome.engines } : {}),
    ...(outcome.engineError ? { engineError: outcome.engineError } : {}),
  }));
  audit.policyInput = outcomes.length === 1 ? first.input : splitShared(outcomes.map((outcome) => outcome.input));
  audit.policyDecision = outcomes.length === 1 ? decisions[0] : splitShared(decisions);
  audit.outcome = outcomes.some((outcome) => outcome.engineError)
    ? 'error'
    : outcomes.some((outcome) => outcome.decision.allow)
      ? 'allow'
      : 'deny';
  audit.clientId = first.input.client?.client_id ?? null;
  audit.subjectId = first.input.subject?.sub ?? null;
}
