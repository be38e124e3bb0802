import type Provider from 'oidc-provider';
import { deviceCodeAwaitingUser } from '../../device/polling.js';
import { builtInGrant } from '../../internals.js';
import { policyGatedGrant } from './gate.js';
import { registerGrantHandlers } from './handler.js';
import { tokenExchangeGrant, type TokenExchangeDeps } from './token-exchange/index.js';
import { umaTicketGrant } from './uma-ticket/index.js';

export type { GrantHandler } from './handler.js';

/** The grants of /token, one handler each (see handler.ts). */
export function installGrants(provider: Provider, deps: TokenExchangeDeps): void {
  registerGrantHandlers(provider, [
    policyGatedGrant(provider, builtInGrant(provider, 'client_credentials'), deps),
    policyGatedGrant(provider, builtInGrant(provider, 'authorization_code'), deps),
    policyGatedGrant(provider, builtInGrant(provider, 'refresh_token'), deps),
    policyGatedGrant(
      provider,
      builtInGrant(provider, 'device_code'),
      deps,
      deviceCodeAwaitingUser(provider, deps.store),
    ),
    tokenExchangeGrant(provider, deps),
    umaTicketGrant(provider, deps),
  ]);
}
