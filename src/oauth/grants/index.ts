import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import * as builtInGrants from 'oidc-provider/lib/actions/grants/index.js';
import * as grantHelpers from 'oidc-provider/lib/helpers/grants.js';
import { policyGated, type GateDeps } from './gate.js';

/** Parameters every gated grant accepts besides its own: RFC 8707, RFC 9396, and our resource hints. */
const SHARED_PARAMETERS = ['resource', 'authorization_details', 'resource_types', 'resource_type', 'scope'];

/**
 * Replaces oidc-provider's client_credentials, authorization_code and refresh_token handlers
 * with policy-gated versions of themselves (one handler per grant, as in ORY Fosite).
 */
export function installPolicyGrants(provider: Provider, deps: GateDeps): void {
  const helpers = Object.fromEntries(Object.entries(grantHelpers).map(([name, helper]) => [name, (helper as (...args: unknown[]) => unknown).bind(undefined, provider)]));
  for (const grant of [builtInGrants.client_credentials, builtInGrants.authorization_code, builtInGrants.refresh_token]) {
    const handler = (ctx: KoaContextWithOIDC) => grant.handler(provider, helpers, ctx);
    provider.registerGrantType(grant.grantType, policyGated(provider, grant.grantType, handler, deps), [...grant.parameters, ...SHARED_PARAMETERS], ['resource']);
  }
}
