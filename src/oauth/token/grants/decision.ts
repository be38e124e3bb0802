import type { KoaContextWithOIDC } from 'oidc-provider';
import { recordDecision } from '../../../audit/index.js';
import type { Decision, DecisionOutcome } from '../../../policy/index.js';
import type { OAuthState } from '../../state.js';

/** What the policy said about this request, kept on the context for the hooks that run later (extraTokenClaims, refresh token issuance). */
export function rememberDecision(ctx: KoaContextWithOIDC, outcome: DecisionOutcome): void {
  ctx.state.policyDecision = outcome.decision;
  recordDecision(ctx.state, outcome);
}

export function decisionOf(ctx: { state: OAuthState }): Decision | undefined {
  return ctx.state.policyDecision;
}

/** Policy scopes narrow what was asked and never widen it; a request that asked for nothing gets what the policy grants. */
export function narrowedScopes(requested: string[], decision: Decision): string[] {
  const allowed = decision.scopes ?? [];
  if (requested.length === 0) return allowed;
  return requested.filter((scope) => allowed.includes(scope));
}
