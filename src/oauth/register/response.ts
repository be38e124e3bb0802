import type { ClientRecord } from '../clients/records.js';
import { routes } from '../routes.js';
import type { IssuedCredentials } from './record.js';

/** RFC 7592 `registration_client_uri` of a client. */
export function registrationClientUri(issuer: string, clientId: string): string {
  return `${issuer}${routes.registration}/${encodeURIComponent(clientId)}`;
}

/**
 * The client information response (RFC 7591 §3.2.1, RFC 7592 §3): every registered field in
 * RFC 7591 names, plus the one-time secret and registration access token when just issued.
 * Nothing stored as a hash or digest is ever shown.
 */
export function clientInformation(
  issuer: string,
  record: ClientRecord,
  issued: IssuedCredentials = {},
): Record<string, unknown> {
  const response: Record<string, unknown> = {
    client_id: record.clientId,
    ...(issued.clientSecret ? { client_secret: issued.clientSecret } : {}),
    client_id_issued_at: record.clientIdIssuedAt,
    client_secret_expires_at: 0,
    redirect_uris: record.redirectUris ?? [],
    grant_types: record.grantTypes ?? [],
    response_types: record.responseTypes ?? [],
    token_endpoint_auth_method: record.tokenEndpointAuthMethod,
    client_name: record.clientName,
    client_uri: record.clientUri,
    logo_uri: record.logoUri,
    tos_uri: record.tosUri,
    policy_uri: record.policyUri,
    contacts: record.contacts,
    scope: record.scopes?.length ? record.scopes.join(' ') : undefined,
    jwks_uri: record.jwksUri,
    jwks: record.jwks,
    require_pushed_authorization_requests: record.requirePushedAuthorizationRequests,
    request_object_signing_alg: record.requestObjectSigningAlg,
    software_id: record.softwareId,
    software_version: record.softwareVersion,
    software_statement: record.softwareStatementJwt,
    granted_resources: record.grantedResources?.length ? record.grantedResources : undefined,
    registration_client_uri: registrationClientUri(issuer, record.clientId),
    ...(issued.registrationAccessToken ? { registration_access_token: issued.registrationAccessToken } : {}),
  };
  return Object.fromEntries(Object.entries(response).filter(([, value]) => value !== undefined));
}
