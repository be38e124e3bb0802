import type Provider from 'oidc-provider';
import { builtInGrant } from '../internals.js';
import { policyGatedGrant, type GateDeps } from './gate.js';
import { registerGrantHandlers } from './handler.js';

export type { GrantHandler } from './handler.js';

/** The grants of /token, one handler each (see handler.ts); token exchange and the UMA grant join this list. */
export function installGrants(provider: Provider, deps: GateDeps): void {
  registerGrantHandlers(provider, [
    policyGatedGrant(provider, builtInGrant(provider, 'client_credentials'), deps),
    policyGatedGrant(provider, builtInGrant(provider, 'authorization_code'), deps),
    policyGatedGrant(provider, builtInGrant(provider, 'refresh_token'), deps),
  ]);
}
