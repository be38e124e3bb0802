import { claimsNamed, scopesCarrying } from '../claims.js';

/**
 * The `claims` authorization request parameter (OIDC Core §5.5) before the `authorize` decision.
 * A claim may be asked for by name, in the ID token or at UserInfo, without the scope that
 * carries it; Arbiter releases a claim only under a scope the policy granted, so such a request
 * puts that scope before the policy as requested (`input.request.scopes`), and the policy decides
 * on it as on any scope. Only the claims asked for are released under it (grant.ts), and the
 * access token's `scope` stays what `scope` asked for.
 */

/** The `scope` parameter's scopes, as `input.request.scopes` has them without a `claims` parameter. */
export function scopeParameter(scope: unknown): string[] {
  if (typeof scope !== 'string') return [];
  return scope
    .split(' ')
    .map((item) => item.trim())
    .filter(Boolean);
}

/**
 * `input.request.scopes` of the `authorize` decision: the `scope` parameter's, and those carrying
 * a claim the `claims` parameter names. Undefined without a `claims` parameter (the scope
 * parameter alone, as requestInput derives it).
 */
export function decisionScopes(params: Record<string, unknown>): string[] | undefined {
  const named = claimsNamed(params.claims);
  if (named.length === 0) return undefined;
  return [...new Set([...scopeParameter(params.scope), ...named.flatMap(scopesCarrying)])];
}
