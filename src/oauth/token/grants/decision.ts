import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { recordDecision } from '../../../audit/index.js';
import type { Decision, DecisionOutcome } from '../../../policy/index.js';

/** What the policy said about this request, kept on the context for the hooks that run later (extraTokenClaims, refresh token issuance). */
export function rememberDecision(ctx: KoaContextWithOIDC, outcome: DecisionOutcome): void {
  ctx.state.policyDecision = outcome.decision;
  recordDecision(ctx.state, outcome);
}

export function decisionOf(ctx: { state: Record<string, unknown> }): Decision | undefined {
  return ctx.state.policyDecision as Decision | undefined;
}

/** A deny as the client sees it: the policy's error (default access_denied); an engine failure is a 503. */
export function denial(outcome: DecisionOutcome): Error {
  const { decision } = outcome;
  if (outcome.engineError) {
    const error = new errors.CustomOIDCProviderError('temporarily_unavailable', 'the policy engine could not decide; try again later');
    (error as unknown as { status: number; statusCode: number }).status = 503;
    (error as unknown as { status: number; statusCode: number }).statusCode = 503;
    return error;
  }
  return new errors.CustomOIDCProviderError(decision.error ?? 'access_denied', decision.error_description ?? 'denied by policy');
}

/** Policy scopes narrow what was asked and never widen it; a request that asked for nothing gets what the policy grants. */
export function narrowedScopes(requested: string[], decision: Decision): string[] {
  const allowed = decision.scopes ?? [];
  if (requested.length === 0) return allowed;
  return requested.filter((scope) => allowed.includes(scope));
}
