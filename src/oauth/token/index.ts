import type { ArbiterMiddleware } from '../state.js';
import { routes } from '../routes.js';
import { clientCredentials } from '../shared/credential-guard.js';
import { formBody } from '../shared/form-body.js';
import { REPEATABLE_PARAMETERS } from '../shared/resources.js';
import { tokenPrecheck } from './precheck.js';

export { installGrants } from './grants/index.js';
export { clientAuthentication, decisionClaims, refreshTokens, resourceIndicators } from './shaping.js';

export const TOKEN_PATH = routes.token;

export interface TokenDeps {
  issuer: string;
  maxBodyBytes: number;
}

/**
 * What Arbiter adds at /token in front of oidc-provider, in order: the form read with the size
 * limit, the requests the spec refuses before client authentication, a form naming no client at
 * all refused (401 invalid_client, RFC 6749 §5.2; a public client names itself by client_id), a
 * client that failed too often refused before its credentials are verified. The
 * grants themselves, each gated by policy, are registered with oidc-provider (grants/).
 */
export function tokenMiddleware({ issuer, maxBodyBytes }: TokenDeps): ArbiterMiddleware[] {
  return [
    formBody(maxBodyBytes, REPEATABLE_PARAMETERS),
    tokenPrecheck,
    clientCredentials({ issuer, publicClients: true, bearer: false }, { formsOnly: true }),
  ];
}
