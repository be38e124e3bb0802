import type { AdapterPayload } from 'oidc-provider';
import type { ClientRecord } from '../../catalog/index.js';
import { TOKEN_EXCHANGE } from '../token/grants/token-exchange/parameters.js';
import { UMA_TICKET } from '../token/grants/uma-ticket/parameters.js';

/**
 * The one mapping between a client record (the catalog's names) and client metadata (RFC 7591
 * names): dynamic registration reads a request through it and answers through it, and
 * oidc-provider is given a client through it. `provider`: oidc-provider is given the member.
 */
const REGISTERED_MEMBERS = [
  { field: 'redirectUris', member: 'redirect_uris', provider: true },
  { field: 'tokenEndpointAuthMethod', member: 'token_endpoint_auth_method', provider: true },
  { field: 'grantTypes', member: 'grant_types', provider: true },
  { field: 'responseTypes', member: 'response_types', provider: true },
  { field: 'clientName', member: 'client_name', provider: true },
  { field: 'clientUri', member: 'client_uri', provider: true },
  { field: 'logoUri', member: 'logo_uri', provider: true },
  { field: 'tosUri', member: 'tos_uri', provider: false },
  { field: 'policyUri', member: 'policy_uri', provider: false },
  { field: 'contacts', member: 'contacts', provider: false },
  { field: 'jwksUri', member: 'jwks_uri', provider: true },
  { field: 'jwks', member: 'jwks', provider: true },
  { field: 'softwareId', member: 'software_id', provider: false },
  { field: 'softwareVersion', member: 'software_version', provider: false },
  { field: 'requirePushedAuthorizationRequests', member: 'require_pushed_authorization_requests', provider: true },
  { field: 'requestObjectSigningAlg', member: 'request_object_signing_alg', provider: true },
  { field: 'backchannelLogoutUri', member: 'backchannel_logout_uri', provider: true },
  { field: 'backchannelLogoutSessionRequired', member: 'backchannel_logout_session_required', provider: true },
  { field: 'introspectionSignedResponseAlg', member: 'introspection_signed_response_alg', provider: true },
  { field: 'tlsClientAuthSubjectDn', member: 'tls_client_auth_subject_dn', provider: true },
  { field: 'tlsClientAuthSanDns', member: 'tls_client_auth_san_dns', provider: true },
  { field: 'tlsClientAuthSanUri', member: 'tls_client_auth_san_uri', provider: true },
  { field: 'tlsClientAuthSanIp', member: 'tls_client_auth_san_ip', provider: true },
  { field: 'tlsClientAuthSanEmail', member: 'tls_client_auth_san_email', provider: true },
  {
    field: 'tlsClientCertificateBoundAccessTokens',
    member: 'tls_client_certificate_bound_access_tokens',
    provider: true,
  },
  { field: 'dpopBoundAccessTokens', member: 'dpop_bound_access_tokens', provider: true },
] as const satisfies readonly { field: keyof ClientRecord; member: string; provider: boolean }[];

/** The record fields a registration's metadata sets (RFC 7591 members, in the catalog's names). */
export const REGISTERED_FIELDS: readonly RegisteredField[] = REGISTERED_MEMBERS.map(({ field }) => field);

/** The RFC 7591 name of each registered field of a client record. */
export const memberOfField: Readonly<Record<string, string>> = Object.fromEntries(
  REGISTERED_MEMBERS.map(({ field, member }) => [field, member]),
);

/**
 * Every client lookup maps a record: the provider's share is picked once, without the members
 * clientMetadata derives rather than copies.
 */
const DERIVED_MEMBERS = new Set([
  'redirect_uris',
  'response_types',
  'grant_types',
  'token_endpoint_auth_method',
  'request_object_signing_alg',
]);
const COPIED_PROVIDER_MEMBERS = REGISTERED_MEMBERS.filter(
  ({ member, provider }) => provider && !DERIVED_MEMBERS.has(member),
);

type RegisteredField = (typeof REGISTERED_MEMBERS)[number]['field'];

/** RFC 7591 metadata members, by name, as a registration request gives them once validated. */
export type RegisteredMetadata = {
  [Entry in (typeof REGISTERED_MEMBERS)[number] as Entry['member']]?: ClientRecord[Entry['field']];
};

/** The record fields of registered metadata (absent members left out). */
export function recordFieldsOf(metadata: RegisteredMetadata): Pick<ClientRecord, RegisteredField> {
  const fields = REGISTERED_MEMBERS.map(({ field, member }) => [field, metadata[member]] as const);
  return withoutUndefined(Object.fromEntries(fields)) as Pick<ClientRecord, RegisteredField>;
}

/** The record's registered fields under their RFC 7591 names. */
export function registeredMetadataOf(record: ClientRecord): Record<string, unknown> {
  return withoutUndefined(Object.fromEntries(REGISTERED_MEMBERS.map(({ field, member }) => [member, record[field]])));
}

/**
 * Grants every client may ask for, because the policy decides each request: token exchange (the
 * grant refuses public clients with unauthorized_client, as RFC 8693 needs a confidential one)
 * and the UMA grant (uma_permission decides per permission).
 */
const POLICY_DECIDED_GRANTS = [TOKEN_EXCHANGE, UMA_TICKET];

/**
 * oidc-provider client metadata for a client record; disabled clients do not exist for the protocol.
 * Built member by member (no spreads, entries or filters): every client lookup, so every /token, makes one.
 */
export function clientMetadata(record: ClientRecord): AdapterPayload | undefined {
  if (record.enabled === false) return undefined;
  const confidential = record.clientType === 'confidential';
  const grants = grantTypes(record);
  const metadata: Record<string, unknown> = {};
  for (const { field, member } of COPIED_PROVIDER_MEMBERS)
    if (record[field] !== undefined) metadata[member] = record[field];
  metadata.client_id = record.clientId;
  metadata.redirect_uris = record.redirectUris ?? [];
  metadata.post_logout_redirect_uris = record.postLogoutRedirectUris ?? [];
  metadata.response_types = grants.includes('authorization_code') ? ['code'] : [];
  metadata.grant_types = grants;
  metadata.token_endpoint_auth_method =
    record.tokenEndpointAuthMethod ?? (confidential ? 'client_secret_basic' : 'none');
  // Without keys no request object of the client can be verified at all, and oidc-provider would
  // refuse the whole client for a signing algorithm without keys: the algorithm is then moot.
  if ((record.jwks || record.jwksUri) && record.requestObjectSigningAlg !== undefined)
    metadata.request_object_signing_alg = record.requestObjectSigningAlg;
  // The BCrypt hash: oidc-provider compares presented secrets through our compareClientSecret.
  if (confidential && record.clientSecret != null) metadata.client_secret = record.clientSecret;
  return metadata as AdapterPayload;
}

/**
 * Registered grant types when the record lists them (dynamic registration), else: redirect-based
 * grants need a redirect URI; client_credentials needs a secret or a key.
 */
export function grantTypes(record: ClientRecord): string[] {
  if (Array.isArray(record.grantTypes)) {
    const redirects = Boolean(record.redirectUris?.length);
    const confidential = record.clientType === 'confidential';
    const registered = record.grantTypes.filter((grant) =>
      grant === 'client_credentials' ? confidential : grant !== 'authorization_code' || redirects,
    );
    return [...new Set([...registered, ...POLICY_DECIDED_GRANTS])];
  }
  const userGrants = record.redirectUris?.length ? ['authorization_code', 'refresh_token'] : [];
  return record.clientType === 'confidential'
    ? [...userGrants, 'client_credentials', ...POLICY_DECIDED_GRANTS]
    : [...userGrants, ...POLICY_DECIDED_GRANTS];
}

function withoutUndefined<T extends Record<string, unknown>>(object: T): T {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as T;
}
