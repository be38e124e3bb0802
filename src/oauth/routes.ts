import { CLIENT_AUTH_METHODS } from './clients/auth-method.js';
import { REQUEST_OBJECT_SIGNING_ALGS } from '../catalog/index.js';

/**
 * The one routes table: the spec's endpoint paths (discovery table), given to oidc-provider as
 * its `routes`; each endpoint folder exports its own (authorize/, token/, …), and edge.ts maps
 * each path to what Arbiter adds there.
 */
export const routes = {
  authorization: '/authorize',
  token: '/token',
  registration: '/register',
  jwks: '/.well-known/jwks.json',
  userinfo: '/userinfo',
  introspection: '/introspect',
  end_session: '/session/end',
  revocation: '/revoke',
  pushed_authorization_request: '/par',
  // RFC 8628 (device/): the device authorization endpoint, and the page where the user enters the code.
  device_authorization: '/device/auth',
  code_verification: '/device',
} as const;

/** A path as oidc-provider's router compares it (lib/helpers/router.js): ASCII letters folded, one trailing slash dropped. */
export function asMatched(path: string): string {
  const folded = path.replace(/[a-z]+/g, (letters) => letters.toUpperCase());
  return folded.length > 1 && folded.endsWith('/') ? folded.slice(0, -1) : folded;
}

/** Where oidc-provider publishes its discovery document (fixed by OpenID Connect Discovery). */
export const DISCOVERY_PATH = '/.well-known/openid-configuration';

/**
 * RFC 8414 §3: the authorization server metadata, which oidc-provider also publishes. It is the
 * discovery document itself (discovery.ts): MCP clients read this one first.
 */
export const OAUTH_SERVER_METADATA_PATH = '/.well-known/oauth-authorization-server';

/** UMA 2.0 Grant §2: the authorization server's UMA metadata (the same document, see discovery.ts). */
export const UMA_CONFIGURATION_PATH = '/.well-known/uma2-configuration';

/**
 * What Arbiter adds to oidc-provider's discovery document, feature by feature. A feature's
 * fields are published only while it is `enabled`, so that discovery never advertises an
 * endpoint or a capability that does not answer: switch a feature on in the change that makes
 * it work (and its test), not before.
 */
export interface AdvertisedFeature {
  enabled: boolean;
  /** Discovery fields naming an endpoint → its path under the issuer. */
  endpoints?: Readonly<Record<string, string>>;
  /** Other discovery fields, published as they are. */
  metadata?: Readonly<Record<string, unknown>>;
  /** Discovery fields that follow oidc-provider's own document (what it accepts depends on configuration). */
  fromDocument?: (document: Readonly<Record<string, unknown>>) => Record<string, unknown>;
}

export type AdvertisedFeatureName =
  | 'umaResourceRegistration'
  | 'umaPermission'
  | 'clientIdMetadataDocuments'
  | 'pkcePlain'
  | 'pushedAuthorizationRequests'
  | 'requestObjects'
  | 'revocationAuthentication'
  | 'introspectionAuthentication';

/**
 * The algorithms a request object may be signed with (RFC 9101 §6.1): oidc-provider's defaults
 * without HS256. Asymmetric only: an HS* request object is verified with the client secret, and
 * Arbiter keeps secrets only as BCrypt hashes, so it could never verify one. `none` is refused too:
 * an unsigned request object proves nothing the query string does not (authorize/request-object.ts).
 */
export const advertisedFeatures: Readonly<Record<AdvertisedFeatureName, AdvertisedFeature>> = {
  /** UMA 2.0 resource registration (spec: UMA; src/uma). */
  umaResourceRegistration: {
    enabled: true,
    endpoints: { resource_registration_endpoint: '/resource_registration/resource' },
  },
  /**
   * UMA 2.0 permission tickets and the UMA grant (src/uma, token/grants/uma-ticket); the grant type is in
   * oidc-provider's own grant_types_supported. No UMA profile is implemented, so the list is empty.
   */
  umaPermission: {
    enabled: true,
    endpoints: { permission_endpoint: '/permission' },
    metadata: { uma_profiles_supported: [] },
  },
  /** An https URL as client_id (spec: client ID metadata document rules; oauth/cimd). */
  clientIdMetadataDocuments: { enabled: true, metadata: { client_id_metadata_document_supported: true } },
  /** PKCE `plain` besides S256 (authorize/pkce-plain.ts); oidc-provider alone would say S256 only. */
  pkcePlain: { enabled: true, metadata: { code_challenge_methods_supported: ['S256', 'plain'] } },
  /**
   * RFC 9126 pushed authorization requests (src/oauth/par). Not required server-wide: a client is
   * held to PAR by its own `require_pushed_authorization_requests` (Admin API, registration).
   */
  pushedAuthorizationRequests: {
    enabled: true,
    endpoints: { pushed_authorization_request_endpoint: '/par' },
    metadata: { require_pushed_authorization_requests: false },
  },
  /**
   * RFC 9101 request objects by value (authorize/request-object.ts), signed with one of the client's
   * registered public keys; by reference only as PAR's own `urn:ietf:params:oauth:request_uri:`, so
   * `request_uri_parameter_supported` stays false (a client's own request_uri is not fetched).
   */
  requestObjects: {
    enabled: true,
    metadata: {
      request_parameter_supported: true,
      request_uri_parameter_supported: false,
      request_object_signing_alg_values_supported: [...REQUEST_OBJECT_SIGNING_ALGS],
    },
  },
  /**
   * RFC 8414 §2: how a client authenticates at /revoke (oidc-provider publishes the endpoint, not
   * the methods): as at /token, a public client by its client_id alone (RFC 7009 §2.1; revoke/),
   * and by certificate (RFC 8705 §2) where mutual TLS is on: oidc-provider accepts its one list
   * of methods at every endpoint that authenticates clients.
   */
  revocationAuthentication: {
    enabled: true,
    fromDocument: (document) => ({ revocation_endpoint_auth_methods_supported: tokenEndpointAuthMethods(document) }),
  },
  /**
   * RFC 8414 §2: how a caller authenticates at /introspect (introspect/): the confidential methods
   * of /token (mutual TLS's among them where it is on), or an access token (`Bearer`, a value of
   * the access token types registry that RFC 8414 allows here). `none` is refused: RFC 7662 §2.1
   * requires the caller to be authorized.
   */
  introspectionAuthentication: {
    enabled: true,
    fromDocument: (document) => ({
      introspection_endpoint_auth_methods_supported: [
        ...tokenEndpointAuthMethods(document).filter((method) => method !== 'none'),
        'Bearer',
      ],
    }),
  },
};

/** The methods oidc-provider accepts (its `clientAuthMethods`, which it publishes for /token), else the spec's. */
function tokenEndpointAuthMethods(document: Readonly<Record<string, unknown>>): string[] {
  const methods = document.token_endpoint_auth_methods_supported;
  return Array.isArray(methods) ? (methods as string[]) : [...CLIENT_AUTH_METHODS];
}
