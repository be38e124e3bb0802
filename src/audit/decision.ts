import { isSharedPart, joinShared, splitShared, type DecisionOutcome } from '../policy/index.js';
import type { AuditFacts } from './facts.js';

/**
 * Tells the request's audit entry which decision(s) it asked for: the input, what each engine
 * said (and why none could), the decision point (for a replay), and the outcome. A request that
 * asks several questions (one per UMA permission) records them all, in order.
 */
export function recordDecision(state: Record<string, unknown>, ...outcomes: DecisionOutcome[]): void {
  const audit = state.audit as AuditFacts | undefined;
  if (!audit || outcomes.length === 0) return;
  const [first] = outcomes;
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

/**
 * The inputs (or decisions) an entry's policyInput (policyDecision) holds, in order: one, the
 * shared part with each one's own (several decisions), or a list (entries written before the
 * shared part was kept once). Null when it holds none.
 */
export function eachRecorded(recorded: unknown): unknown[] | null {
  if (recorded === null || recorded === undefined) return null;
  if (isSharedPart(recorded)) return joinShared(recorded);
  return Array.isArray(recorded) ? recorded : [recorded];
}
