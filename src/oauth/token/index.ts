import type { ArbiterMiddleware } from '../state.js';
import type Provider from 'oidc-provider';
import { routes } from '../routes.js';
import { guardClientCredentials } from '../shared/credential-guard.js';
import { formBody } from '../shared/form-body.js';
import { REPEATABLE_PARAMETERS } from '../shared/resources.js';
import { syncAuthorizationDetailsTypes } from '../shared/rar.js';
import { tokenPrecheck } from './precheck.js';
import type { Tenant } from '../../tenancy/index.js';

export { installGrants } from './grants/index.js';
export { clientAuthentication, decisionClaims, refreshTokens, resourceIndicators } from './shaping.js';

export const TOKEN_PATH = routes.token;

export interface TokenDeps {
  providerFor: (tenant: Tenant) => Provider;
  authorizationDetailsTypes: () => Promise<string[]>;
  maxBodyBytes: number;
}

/**
 * What Arbiter adds at /token in front of oidc-provider, in order: the form read with the size
 * limit, a client that failed too often refused before its credentials are verified, the
 * requests the spec refuses before client authentication, the RAR types of policy data. The
 * grants themselves, each gated by policy, are registered with oidc-provider (grants/).
 */
export function tokenMiddleware({
  providerFor,
  authorizationDetailsTypes,
  maxBodyBytes,
}: TokenDeps): ArbiterMiddleware[] {
  return [
    formBody(maxBodyBytes, REPEATABLE_PARAMETERS),
    guardClientCredentials,
    tokenPrecheck,
    syncAuthorizationDetailsTypes(providerFor, authorizationDetailsTypes),
  ];
}
