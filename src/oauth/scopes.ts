import type Provider from 'oidc-provider';
import instance from 'oidc-provider/lib/helpers/weak_cache.js';

/**
 * Makes oidc-provider recognize scopes the policy has just granted.
 *
 * oidc-provider silently drops any scope outside its configured list when it issues a code
 * or a token without a resource indicator. In Arbiter the policy engine, not a static list,
 * decides which scopes exist for which client, so each scope a decision grants is added to
 * that list before oidc-provider filters. The list grows only with what policies grant;
 * discovery keeps advertising the spec's scopes (see discovery.ts).
 */
export function recognizeScopes(provider: Provider, scopes: Iterable<string>): void {
  const known = instance(provider).configuration.scopes;
  for (const scope of scopes) known.add(scope);
}
