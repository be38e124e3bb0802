/**
 * The JSON Schemas of the shared records (a create/replace body of the Admin API), `as const` so
 * that each record's TypeScript type is derived from its schema (./types.ts, json-schema-to-ts):
 * a field added here is a field of the type, and no hand-written copy can drift from it.
 */

const string = { type: 'string', maxLength: 4096 } as const;
const nonEmpty = { type: 'string', minLength: 1, maxLength: 4096 } as const;
const strings = { type: 'array', items: nonEmpty, maxItems: 500 } as const;
const uri = { type: 'string', format: 'uri', maxLength: 4096 } as const;
/** URLs Arbiter fetches or hands to browsers: nothing but http(s) (never file:, ftp:, javascript:). */
const httpUri = { type: 'string', format: 'uri', pattern: '^https?://', maxLength: 4096 } as const;
const httpsUri = { type: 'string', format: 'uri', pattern: '^https://', maxLength: 4096 } as const;
const internalKey = { type: 'integer', minimum: 1 } as const;
const tenantId = { type: ['string', 'null'], pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' } as const;
const enabled = { type: 'boolean' } as const;
/** A policy record's mode: live (the default) is in force; shadow is evaluated beside it and decides nothing. */
const policyMode = {
  enum: ['live', 'shadow'],
  description:
    'live (the default): in the policy bundle; shadow: in the candidate bundle every live decision is also evaluated against, deciding nothing until promoted',
} as const;
/**
 * A client secret in clear (1 to 72 bytes, BCrypt's limit), which the Admin API hashes, or a BCrypt
 * hash made elsewhere (the console hashes in the browser): the `client-secret` format, src/http/validation.ts.
 */
const clientSecret = {
  type: 'string',
  format: 'client-secret',
  description:
    'the secret in clear (1 to 72 bytes), or its BCrypt hash ($2a$, $2b$, $2y$); only the hash is stored, and no answer shows either',
} as const;

/** A record's body: exactly these properties (and the tenant it belongs to), `required` among them. */
function object<const Required extends readonly string[], const Properties extends Record<string, unknown>>(
  required: Required,
  properties: Properties,
) {
  return {
    type: 'object',
    additionalProperties: false,
    required,
    properties: { ...properties, tenantId },
  } as const;
}

export const IDENTITY_PROVIDER_SCHEMA = object(['issuer'], {
  issuer: httpUri,
  // Not dots alone: it names the provider's own callback path, {issuer}/idp/callback/{idpId}.
  idpId: { type: 'string', pattern: '^(?!\\.+$)[A-Za-z0-9._~-]{1,128}$' },
  name: string,
  enabled,
  sharedCallback: {
    type: 'boolean',
    description:
      "true: the provider sends the browser back to the callback every provider of the tenant shares, {issuer}/idp/callback (providers registered with an older release are set so on upgrade); another provider of the tenant could then mix its responses up with this one's (RFC 9700 §4.4). Absent or false: to its own, {issuer}/idp/callback/{idpId}",
  },
  clientId: nonEmpty,
  clientSecret: nonEmpty,
  scopes: strings,
  authorizationEndpoint: httpUri,
  tokenEndpoint: httpUri,
  userinfoEndpoint: httpUri,
  jwksUri: httpUri,
  // A Shared Signals (SSF 1.0) transmitter of this provider's, trusted to push Security Event Tokens
  // about its users (src/signals/receiver): their issuer, their keys, the audience they name, the push's bearer.
  ssfIssuer: {
    ...httpUri,
    description:
      "the issuer of the provider's Shared Signals transmitter (the iss of its SETs), which pushes them to {issuer}/idp/ssf-events",
  },
  ssfJwksUri: {
    ...httpUri,
    description: "the transmitter's keys; not set: the jwks_uri of its /.well-known/ssf-configuration",
  },
  ssfAudience: { ...nonEmpty, description: "the aud its SETs must name; not set: the tenant's issuer" },
  ssfPushSecret: {
    type: 'string',
    minLength: 16,
    maxLength: 4096,
    description:
      'the bearer token the transmitter sends with each push (Authorization: Bearer …), at least 16 characters; stored sealed, and no answer shows it',
  },
});

export const RESOURCE_SERVER_SCHEMA = object(['resourceIndicator'], {
  resourceIndicator: { ...uri, pattern: '^[^#]*$' },
  name: string,
  description: string,
  capability: { type: 'object' },
  clientId: internalKey,
  enabled,
  typeUris: strings,
  accessTokenFormat: {
    enum: ['opaque', 'jwt'],
    description:
      "opaque (the default): tokens for this resource server are read through introspection; jwt: RFC 9068 JWT access tokens signed with the tenant's keys, verified by the resource server itself",
  },
});

export const RESOURCE_TYPE_SCHEMA = object(['typeUri'], {
  typeUri: nonEmpty,
  name: string,
  description: string,
  parentTypeId: internalKey,
  enabled,
  scopes: strings,
});

export const RESOURCE_SCHEMA = object(['resourceServerId', 'resourceTypeId', 'resourceIdentifier'], {
  resourceServerId: internalKey,
  resourceTypeId: internalKey,
  resourceIdentifier: nonEmpty,
  ownerSubjectId: internalKey,
  scopes: strings,
});

/** The grants a client may be registered for: those Arbiter answers at /token, each gated by the `token` policy. */
export const CLIENT_GRANT_TYPES = [
  'authorization_code',
  'refresh_token',
  'client_credentials',
  'urn:ietf:params:oauth:grant-type:token-exchange',
  'urn:ietf:params:oauth:grant-type:device_code',
] as const;

/** How a client authenticates at /token (client_secret_jwt is not offered: secrets are stored hashed). */
const CLIENT_AUTH_METHODS = [
  'none',
  'client_secret_basic',
  'client_secret_post',
  'private_key_jwt',
  // RFC 8705 §2: a client certificate, where mutual TLS is configured (src/oauth/mtls).
  'tls_client_auth',
  'self_signed_tls_client_auth',
] as const;

/** The algorithms a client's request objects may be signed with: asymmetric only, as secrets are BCrypt hashes. */
export const REQUEST_OBJECT_SIGNING_ALGS = ['RS256', 'PS256', 'ES256', 'Ed25519', 'EdDSA'] as const;

/**
 * The algorithms a JWT introspection response (RFC 9701) may be signed with: that of the tenant's
 * signing keys, each an RSA key for RS256 alone (its JWK names the algorithm: src/oauth/keys.ts).
 */
export const INTROSPECTION_SIGNING_ALGS = ['RS256'] as const;

/** A key that names a record in an Admin API path: `.` and `..` would be read as dot segments. */
const NOT_DOTS_ALONE = '^(?!\\.+$)';

/** The longest client_id a client may have: a longer one names no client (nothing is looked up for it). */
export const MAX_CLIENT_ID_LENGTH = 2048;

export const CLIENT_SCHEMA = object(['clientId', 'clientType'], {
  // Not dots alone, as idpId: a path /admin/api/clients/.. names no client (dot segments), so such
  // a client could be neither changed, disabled, revoked nor deleted (found 2026-11-30).
  clientId: { type: 'string', minLength: 1, maxLength: MAX_CLIENT_ID_LENGTH, pattern: NOT_DOTS_ALONE },
  clientType: { enum: ['confidential', 'public'] },
  clientSecret,
  generateClientSecret: {
    type: 'boolean',
    description:
      'true: the server generates a secret (43 letters and digits, 256 bits), stores its keyed digest and shows it this once, as generatedClientSecret',
  },
  enabled,
  redirectUris: { type: 'array', items: uri, maxItems: 100 },
  postLogoutRedirectUris: { type: 'array', items: uri, maxItems: 100 },
  // OIDC Back-Channel Logout 1.0 §2.2: where logout tokens are posted when the user's session ends.
  backchannelLogoutUri: httpUri,
  backchannelLogoutSessionRequired: { type: 'boolean' },
  // The FAPI 2.0 Security Profile (src/oauth/fapi): PAR, PKCE S256, DPoP or mTLS, private_key_jwt or mTLS, PS256 ID tokens.
  profile: { enum: ['fapi2-security'] },
  clientName: string,
  clientUri: httpUri,
  logoUri: httpUri,
  tokenEndpointAuthMethod: { enum: CLIENT_AUTH_METHODS },
  jwksUri: httpsUri,
  jwks: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', items: { type: 'object' } } } },
  // RFC 8705 §2.1.2: the one subject value (DN or SAN) of the certificate a tls_client_auth client presents.
  tlsClientAuthSubjectDn: nonEmpty,
  tlsClientAuthSanDns: nonEmpty,
  tlsClientAuthSanUri: nonEmpty,
  tlsClientAuthSanIp: nonEmpty,
  tlsClientAuthSanEmail: nonEmpty,
  // RFC 8705 §3.4: its access tokens are bound to the certificate it presented at /token.
  tlsClientCertificateBoundAccessTokens: { type: 'boolean' },
  // RFC 9449 §5.2: it always uses DPoP; a token request without a proof is refused, so it never gets a Bearer token.
  dpopBoundAccessTokens: { type: 'boolean' },
  // RFC 9126 §6: this client may only send authorization requests pushed to /par.
  requirePushedAuthorizationRequests: { type: 'boolean' },
  // RFC 9101 §9 (OIDC Registration): the one algorithm its request objects are signed with, verified
  // with its jwks/jwksUri (without either, none can be verified).
  requestObjectSigningAlg: { enum: REQUEST_OBJECT_SIGNING_ALGS },
  // RFC 9701 §6: how its JWT introspection responses are signed (asked for with Accept:
  // application/token-introspection+jwt); not set: RS256.
  introspectionSignedResponseAlg: { enum: INTROSPECTION_SIGNING_ALGS },
  softwareStatement: { type: 'object' },
  scopes: strings,
  registrationType: { enum: ['admin', 'dcr', 'cimd'] },
  // Set by dynamic registration (src/oauth/register), kept through an Admin PUT of such a record.
  grantTypes: { type: 'array', items: { enum: CLIENT_GRANT_TYPES }, maxItems: 10 },
  responseTypes: { type: 'array', items: { enum: ['code'] }, maxItems: 1 },
  tosUri: httpUri,
  policyUri: httpUri,
  contacts: { type: 'array', items: { type: 'string', format: 'email', maxLength: 254 }, maxItems: 20 },
  softwareId: { type: 'string', format: 'uuid' },
  softwareVersion: string,
  softwareStatementJwt: { type: 'string', maxLength: 1048576 },
  grantedResources: {
    type: 'array',
    maxItems: 100,
    items: {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'scopes'],
      properties: { type: nonEmpty, scopes: { type: 'array', items: string, maxItems: 500 } },
    },
  },
  registrationAccessTokenDigest: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
  clientIdIssuedAt: { type: 'integer', minimum: 0 },
});

export const INITIAL_ACCESS_TOKEN_SCHEMA = object([], {
  name: string,
  uses: { type: 'integer', minimum: 1 },
  expiresAt: { type: 'string', format: 'date-time' },
});

export const SUBJECT_SCHEMA = object(['subjectId'], {
  subjectId: nonEmpty,
  identityProviderId: internalKey,
  name: string,
  email: string,
  // What a sign-in stores from the upstream's email_verified: a GET of it is PUT back unchanged.
  emailVerified: { type: 'boolean' },
  preferredUsername: string,
});

export const POLICY_RULE_SCHEMA = object(['kind', 'path', 'content'], {
  version: { type: ['string', 'null'], maxLength: 128 },
  kind: { enum: ['rego', 'cedar'] },
  path: { type: 'string', pattern: '^[A-Za-z0-9_][A-Za-z0-9_./-]{0,255}$', not: { pattern: '(^|/)\\.\\.?(/|$)' } },
  content: { type: 'string', minLength: 1, maxLength: 1048576 },
  enabled,
  digest: { type: ['string', 'null'], maxLength: 256 },
  mode: policyMode,
});

export const POLICY_DATA_SCHEMA = object(['dataKey', 'payload'], {
  // Identifiers separated by dots, none of them __proto__ (policy/bundle/data-tree.ts says why).
  dataKey: {
    type: 'string',
    pattern: '^(?!__proto__(\\.|$))[A-Za-z_][A-Za-z0-9_]*(\\.(?!__proto__(\\.|$))[A-Za-z_][A-Za-z0-9_]*)*$',
    maxLength: 256,
  },
  payload: { type: 'string', minLength: 1, maxLength: 1048576 },
  // A JSON Schema (as JSON text) that data.<dataKey> must match once merged (policy/bundle/data-schemas.ts).
  schema: { type: ['string', 'null'], maxLength: 65536 },
  version: { type: ['string', 'null'], maxLength: 128 },
  mode: policyMode,
});
