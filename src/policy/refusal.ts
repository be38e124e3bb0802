import { DependencyUnavailableError, HttpError } from '../http/errors.js';
import type { DecisionOutcome } from './contract/types.js';

/** A refusal as the caller sees it: a status, and an OAuth-style error code and description. */
export interface Refusal {
  status: number;
  error: string;
  error_description: string;
}

/** How an endpoint answers a deny: the code of a deny that names none, and the status of each code. */
export interface DenyRules {
  /** Default access_denied. */
  defaultError?: string;
  /** Default 400 for every code. */
  statusOf?: (error: string) => number;
}

/**
 * The one mapping from a decision outcome to the refusal a caller sees, or undefined for an
 * allow. An engine failure is a 503 carrying the fail-closed decision's own error and description
 * (temporarily_unavailable, "the policy engine could not decide …", written once in
 * src/policy/combine.ts), so that every endpoint says it alike; a deny is the policy's error
 * (else the endpoint's default) and description, with the status the endpoint gives that code.
 */
export function refusalOf(outcome: DecisionOutcome, rules: DenyRules = {}): Refusal | undefined {
  const { decision, engineError } = outcome;
  if (decision.allow && !engineError) return undefined;
  const error = decision.error ?? rules.defaultError ?? 'access_denied';
  return {
    status: engineError ? 503 : (rules.statusOf?.(error) ?? 400),
    error,
    error_description: decision.error_description ?? 'denied by policy',
  };
}

/**
 * The refusal of `outcome` as the error Arbiter's own APIs throw (undefined for an allow), answered
 * as `{error, error_description}` by jsonErrors. An engine failure is Unavailable (the policy
 * engine is the dependency): a 503 logged with its reason, not as an unexpected error.
 */
export function httpRefusal(outcome: DecisionOutcome, rules?: DenyRules): HttpError | undefined {
  const refusal = refusalOf(outcome, rules);
  if (!refusal) return undefined;
  if (outcome.engineError !== undefined)
    return new DependencyUnavailableError(
      'policy engine',
      refusal.error_description,
      outcome.engineError,
      undefined,
      refusal.error,
    );
  return new HttpError(refusal.status, refusal.error, refusal.error_description);
}

/** Enforces a decision in Arbiter's own APIs: returns on an allow, throws the refusal otherwise (an engine failure: 503). */
export const enforceHttp = {
  /** Arbiter's own APIs (UMA, delegation, registration). */
  http(outcome: DecisionOutcome, rules?: DenyRules): void {
    const refusal = httpRefusal(outcome, rules);
    if (refusal) throw refusal;
  },
  /** Where a deny is itself the answer (AuthZEN): only an engine failure is thrown, as in `http`. */
  decided(...outcomes: DecisionOutcome[]): void {
    const failed = outcomes.find((outcome) => outcome.engineError);
    if (failed) throw httpRefusal(failed)!;
  },
};
