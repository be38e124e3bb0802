import type Provider from 'oidc-provider';
import { builtInGrant } from '../internals.js';
import { policyGated, type GateDeps } from './gate.js';

/** Parameters every gated grant accepts besides its own: RFC 8707, RFC 9396, and our resource hints. */
const SHARED_PARAMETERS = ['resource', 'authorization_details', 'resource_types', 'resource_type', 'scope'];

/**
 * Registers client_credentials, authorization_code and refresh_token with oidc-provider's public
 * `registerGrantType`, each as Arbiter's policy steps followed by oidc-provider's own handler.
 */
export function installPolicyGrants(provider: Provider, deps: GateDeps): void {
  for (const grantType of ['client_credentials', 'authorization_code', 'refresh_token'] as const) {
    const grant = builtInGrant(provider, grantType);
    provider.registerGrantType(grant.grantType, policyGated(provider, grant.grantType, grant.handle, deps), [...grant.parameters, ...SHARED_PARAMETERS], ['resource']);
  }
}
