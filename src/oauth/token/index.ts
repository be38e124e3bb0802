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
 * limit, the requests the spec refuses before client authentication, then the client's
 * credential: a form naming no client at all refused (401 invalid_client, RFC 6749 §5.2; a public
 * client names itself by client_id), a client that failed too often refused before its
 * credentials are verified. The RAR types of policy data are the hand-off's (edge.ts). The grants
 * themselves, each gated by policy, are registered with oidc-provider (grants/).
 */
export function tokenMiddleware({ issuer, maxBodyBytes }: TokenDeps): ArbiterMiddleware[] {
  return [
    formBody(maxBodyBytes, REPEATABLE_PARAMETERS),
    tokenPrecheck,
    clientCredentials({ issuer, publicClients: true, bearer: false }, { formsOnly: true }),
  ];
}
