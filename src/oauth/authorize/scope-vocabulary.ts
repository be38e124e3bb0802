import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';
import type Provider from 'oidc-provider';
import type { PolicyEngine } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { clientsCollection } from '../clients/records.js';
import { recognizeScopes } from '../internals.js';
import { authorizationRequestParameters } from './parameters.js';
import type { Tenant } from '../../tenancy/index.js';

/**
 * oidc-provider drops every requested scope it does not know from an authorization request
 * without a resource indicator, before the `authorize` decision is asked. So that the policy
 * sees what was asked for, the requested scopes that belong to the tenant's scope vocabulary
 * are made known first: the scopes policy data names (`oauth.oidc_scopes`, every resource
 * type's `scopes`) and the requesting client's registered `scopes`. Only names an operator
 * wrote are ever added, so made-up scope names cannot grow oidc-provider's list; a scope
 * outside the vocabulary is ignored, as RFC 6749 §3.3 allows.
 */
export function recognizeRequestedScopes(
  store: Store,
  policy: PolicyEngine,
  providerFor: (tenant: Tenant) => Provider,
) {
  return async (ctx: ArbiterContext, next: Next): Promise<void> => {
    const params = authorizationRequestParameters(ctx);
    const requested = typeof params.scope === 'string' ? params.scope.split(' ').filter(Boolean) : [];
    if (requested.length && typeof params.client_id === 'string') {
      const vocabulary = await scopeVocabulary(store, policy, ctx.state.tenant.name, params.client_id);
      recognizeScopes(
        providerFor(ctx.state.tenant),
        requested.filter((scope) => vocabulary.has(scope)),
      );
    }
    await next();
  };
}

async function scopeVocabulary(
  store: Store,
  policy: PolicyEngine,
  tenant: string,
  clientId: string,
): Promise<Set<string>> {
  const [client, oauth] = await Promise.all([
    clientsCollection(store, tenant).findOne({ clientId }),
    policy.policyData('oauth') as Promise<
      { oidc_scopes?: unknown; resource_types?: Record<string, { scopes?: unknown }> } | undefined
    >,
  ]);
  const named = [
    client?.scopes,
    oauth?.oidc_scopes,
    ...Object.values(oauth?.resource_types ?? {}).map((type) => type?.scopes),
  ];
  return new Set(
    named.flatMap((scopes) =>
      Array.isArray(scopes) ? scopes.filter((scope): scope is string => typeof scope === 'string') : [],
    ),
  );
}
