import type { ClientRecord } from '../clients/records.js';
import { registeredMetadataOf } from '../clients/metadata.js';
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
    ...registeredMetadataOf(record),
    redirect_uris: record.redirectUris ?? [],
    grant_types: record.grantTypes ?? [],
    response_types: record.responseTypes ?? [],
    scope: record.scopes?.length ? record.scopes.join(' ') : undefined,
    software_statement: record.softwareStatementJwt,
    granted_resources: record.grantedResources?.length ? record.grantedResources : undefined,
    registration_client_uri: registrationClientUri(issuer, record.clientId),
    ...(issued.registrationAccessToken ? { registration_access_token: issued.registrationAccessToken } : {}),
  };
  return Object.fromEntries(Object.entries(response).filter(([, value]) => value !== undefined));
}
