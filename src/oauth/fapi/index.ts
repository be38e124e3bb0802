import type { JWK } from 'jose';
import type { AdapterPayload, KoaContextWithOIDC } from 'oidc-provider';
import type { Config } from '../../config/index.js';
import type { ConfigurationSlice } from '../context.js';
import { clientRecordSeenByRequest } from '../clients/seen-by-request.js';
import { MTLS_AUTH_METHODS } from '../mtls/index.js';

/** The profile a client record (`profile`) or a tenant (FAPI2_SECURITY_TENANTS) opts into. */
export const FAPI2_SECURITY = 'fapi2-security';

/** FAPI 2.0 Security Profile §5.3.2.1: authorization codes live at most this long (seconds). */
const FAPI2_CODE_SECONDS = 60;
/** §5.4.1: PS256, ES256 or EdDSA; the tenant's RSA keys sign PS256 too. */
const FAPI2_ID_TOKEN_ALG = 'PS256';

/** Whether the tenant's every client is held to the profile. */
export function fapi2Tenant(config: Pick<Config, 'fapi2SecurityTenants'>, tenant: string): boolean {
  return config.fapi2SecurityTenants.includes('*') || config.fapi2SecurityTenants.includes(tenant);
}

/** Whether a client is held to the profile: every client of a tenant held to it, or one whose record opts in. */
export function heldToFapi2(tenantHeld: boolean, record: { profile?: string } | undefined): boolean {
  return tenantHeld || record?.profile === FAPI2_SECURITY;
}

/**
 * What oidc-provider is told of a client held to the FAPI 2.0 Security Profile, over what its
 * record says: every authorization request pushed (§5.3.2.2: PAR), every access token
 * sender-constrained (§5.3.2.1): bound to its certificate when the record asks for that (RFC 8705
 * `tls_client_certificate_bound_access_tokens`), else to a DPoP key; authentication by mutual TLS
 * when registered for it (RFC 8705 §2), else private_key_jwt; ID tokens signed PS256 (§5.4.1).
 * oidc-provider then refuses what breaks them with the spec's errors: an authorization request
 * not pushed (`invalid_request`), a token request without a DPoP proof (`invalid_dpop_proof`)
 * or without the certificate (`invalid_grant`), another authentication (`invalid_client`).
 * Undefined: a client that can authenticate neither way (no keys, no certificate) does not exist
 * for the protocol.
 */
export function fapi2Metadata(metadata: AdapterPayload): AdapterPayload | undefined {
  // RFC 8705 §2's methods: FAPI 2.0's alternative to private_key_jwt (§5.3.2.1).
  const byCertificate = MTLS_AUTH_METHODS.includes(metadata.token_endpoint_auth_method ?? '');
  if (!byCertificate && !metadata.jwks && !metadata.jwks_uri) return undefined;
  const certificateBound = metadata.tls_client_certificate_bound_access_tokens === true;
  return {
    ...metadata,
    require_pushed_authorization_requests: true,
    dpop_bound_access_tokens: !certificateBound,
    token_endpoint_auth_method: byCertificate ? metadata.token_endpoint_auth_method : 'private_key_jwt',
    id_token_signed_response_alg: FAPI2_ID_TOKEN_ALG,
  };
}

/**
 * oidc-provider's own FAPI 2.0 checks for the clients held to it (PKCE required; a client
 * assertion's `aud` the issuer itself), their codes' lifetime, and PS256 among the ID token
 * algorithms (RS256 stays every other client's).
 */
export const fapi2Security: ConfigurationSlice = ({ config, tenant }) => {
  const everyClient = fapi2Tenant(config, tenant);
  const heldToProfile = (clientId: string | undefined) =>
    heldToFapi2(everyClient, clientId === undefined ? undefined : clientRecordSeenByRequest(clientId));
  const codeSeconds = config.ttl.authorizationCodeSeconds;
  return {
    enabledJWA: { idTokenSigningAlgValues: ['RS256', FAPI2_ID_TOKEN_ALG] },
    features: {
      fapi: {
        enabled: true,
        profile: (_ctx: KoaContextWithOIDC, client?: { clientId: string }) =>
          heldToProfile(client?.clientId) ? '2.0' : undefined,
      },
    },
    ttl: {
      AuthorizationCode: (_ctx: KoaContextWithOIDC, _code: unknown, client: { clientId: string }) =>
        heldToProfile(client.clientId) ? Math.min(FAPI2_CODE_SECONDS, codeSeconds) : codeSeconds,
    },
  } as ReturnType<ConfigurationSlice>;
};

/**
 * The tenant's signing keys as oidc-provider gets them: each RSA key also under PS256 (the same
 * key, published a second time with its own `kid`), so that FAPI 2.0 clients' ID tokens are
 * signed PS256; it follows its RS256 twin through rotation (its state and `key_ops`).
 */
export function withPs256Keys(keys: JWK[]): JWK[] {
  const twins = keys
    .filter((key) => key.kty === 'RSA' && key.alg === 'RS256')
    .map((key) => ({ ...key, alg: FAPI2_ID_TOKEN_ALG, kid: `${key.kid}.${FAPI2_ID_TOKEN_ALG}` }));
  return [...keys, ...twins];
}
