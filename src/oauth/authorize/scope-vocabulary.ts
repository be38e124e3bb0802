import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';
import type Provider from 'oidc-provider';
import type { Store } from '../../store/index.js';
import { clientsCollection } from '../clients/records.js';
import { recognizeScopes } from '../internals.js';
import { authorizationRequestParameters } from './parameters.js';
import type { Tenant } from '../../tenancy/index.js';

/**
 * oidc-provider drops every requested scope it does not know from an authorization request
 * without a resource indicator, before the `authorize` decision is asked. It is built knowing the
 * spec's scopes and those policy data names (configuration.ts, once per policy revision); so
 * that the policy sees what was asked for, the requested scopes the requesting client registered
 * (its `scopes`, which are not policy data) are made known too. Only names an operator wrote are
 * ever added, so made-up scope names cannot grow oidc-provider's list; a scope outside the
 * tenant's vocabulary is ignored, as RFC 6749 §3.3 allows.
 */
export function recognizeRequestedScopes(store: Store, providerFor: (tenant: Tenant) => Provider) {
  return async (ctx: ArbiterContext, next: Next): Promise<void> => {
    const params = authorizationRequestParameters(ctx);
    const requested = typeof params.scope === 'string' ? params.scope.split(' ').filter(Boolean) : [];
    if (requested.length && typeof params.client_id === 'string') {
      const client = await clientsCollection(store, ctx.state.tenant.name).findOne({ clientId: params.client_id });
      const registered = new Set(Array.isArray(client?.scopes) ? client.scopes : []);
      recognizeScopes(
        providerFor(ctx.state.tenant),
        requested.filter((scope) => registered.has(scope)),
      );
    }
    await next();
  };
}
