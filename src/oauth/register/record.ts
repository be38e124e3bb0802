import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { storageDigest, type Sealer, type Store, type TenantCollection } from '../../store/index.js';
import { generateClientSecret, generatedSecretDigest } from '../clients/secrets.js';
import { CLIENTS_COLLECTION, clientsCollection, type ClientRecord } from '../clients/records.js';
import type { RegistrationGrant } from './decision.js';
import type { SoftwareStatement } from './statement.js';
import type { ValidatedMetadata } from './validation.js';

/** The one-time values a registration hands out; only their hash and digest are stored. */
export interface IssuedCredentials {
  clientSecret?: string;
  registrationAccessToken?: string;
}

/** The methods that authenticate with the client secret (private_key_jwt clients get none). */
const usesSecret = (method: string | undefined) => method === 'client_secret_basic' || method === 'client_secret_post';

export function generateRegistrationAccessToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The Arbiter client collection: the Admin API's, the one oidc-provider reads clients from
 * (clients/records.ts), tenant by tenant.
 */
export function clientsOf(store: Store, tenant: string): TenantCollection<ClientRecord> {
  return clientsCollection(store, tenant);
}

/** The registration's own fields of a client record (what a PUT replaces). */
function registeredFields(
  metadata: ValidatedMetadata,
  grant: RegistrationGrant,
  statement: { jwt: string; read: SoftwareStatement } | null,
): Partial<ClientRecord> {
  const fields: Partial<ClientRecord> = {
    clientType: metadata.token_endpoint_auth_method === 'none' ? 'public' : 'confidential',
    redirectUris: metadata.redirect_uris,
    tokenEndpointAuthMethod: metadata.token_endpoint_auth_method,
    grantTypes: grant.grantTypes,
    responseTypes: grant.grantTypes.includes('authorization_code') ? ['code'] : [],
    scopes: grant.scopes,
    grantedResources: grant.grantedResources,
    clientName: metadata.client_name,
    clientUri: metadata.client_uri,
    logoUri: metadata.logo_uri,
    tosUri: metadata.tos_uri,
    policyUri: metadata.policy_uri,
    contacts: metadata.contacts,
    jwksUri: metadata.jwks_uri,
    jwks: metadata.jwks,
    requirePushedAuthorizationRequests: metadata.require_pushed_authorization_requests,
    requestObjectSigningAlg: metadata.request_object_signing_alg,
    softwareId: metadata.software_id,
    softwareVersion: metadata.software_version,
    softwareStatement: statement?.read.claims,
    softwareStatementJwt: statement?.jwt,
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as Partial<ClientRecord>;
}

/** Creates the client; returns it with the secret and registration access token in clear, this once. */
export async function createClient(
  store: Store,
  sealer: Sealer,
  tenant: string,
  tenantId: string | null,
  metadata: ValidatedMetadata,
  grant: RegistrationGrant,
  statement: { jwt: string; read: SoftwareStatement } | null,
): Promise<{ record: ClientRecord; issued: IssuedCredentials }> {
  const fields = registeredFields(metadata, grant, statement);
  const issued: IssuedCredentials = { registrationAccessToken: generateRegistrationAccessToken() };
  if (usesSecret(fields.tokenEndpointAuthMethod)) issued.clientSecret = generateClientSecret();
  const now = new Date();
  const record = {
    ...fields,
    id: await store.nextSequence(CLIENTS_COLLECTION),
    clientId: randomUUID(),
    enabled: true,
    registrationType: 'dcr',
    ...(issued.clientSecret ? { clientSecret: generatedSecretDigest(sealer, issued.clientSecret) } : {}),
    registrationAccessTokenDigest: storageDigest(issued.registrationAccessToken!),
    clientIdIssuedAt: Math.floor(now.getTime() / 1000),
    tenantId,
    createdAt: now.toISOString(),
    updatedAt: now.toISOString(),
  } as ClientRecord;
  return { record: await clientsOf(store, tenant).insert(record), issued };
}

/**
 * Replaces the registration's fields (RFC 7592 update). The secret is kept while the client
 * keeps the same secret-based method; a change to another secret-based method issues a new
 * one, a change to `none` or private_key_jwt drops it. Operator fields (enabled, post-logout URIs) are kept.
 * The registration access token is rotated (RFC 7592 §2.2 allows it; oidc-provider's default
 * `rotateRegistrationAccessToken`): the answer carries a new one and the presented one stops
 * working. Null when the presented token was rotated or the client deleted meanwhile (a
 * concurrent update won): nothing is changed then.
 */
export async function updateClient(
  store: Store,
  sealer: Sealer,
  tenant: string,
  existing: ClientRecord,
  metadata: ValidatedMetadata,
  grant: RegistrationGrant,
  statement: { jwt: string; read: SoftwareStatement } | null,
): Promise<{ record: ClientRecord; issued: IssuedCredentials } | null> {
  const fields = registeredFields(metadata, grant, statement);
  const issued: IssuedCredentials = { registrationAccessToken: generateRegistrationAccessToken() };
  const registrationAccessTokenDigest = storageDigest(issued.registrationAccessToken!);
  // Compare and set: of two updates with the same token, one wins and the other is refused.
  const claimed = await clientsOf(store, tenant).update(
    existing.id,
    { registrationAccessTokenDigest },
    { registrationAccessTokenDigest: existing.registrationAccessTokenDigest as string },
  );
  if (!claimed) return null;
  const keepsSecret =
    usesSecret(fields.tokenEndpointAuthMethod) &&
    existing.tokenEndpointAuthMethod === fields.tokenEndpointAuthMethod &&
    typeof existing.clientSecret === 'string';
  if (usesSecret(fields.tokenEndpointAuthMethod) && !keepsSecret) issued.clientSecret = generateClientSecret();
  const { clientSecret: oldSecret, ...kept } = existing;
  const registrationOwned = [
    'clientName',
    'clientUri',
    'logoUri',
    'tosUri',
    'policyUri',
    'contacts',
    'jwksUri',
    'jwks',
    'requirePushedAuthorizationRequests',
    'requestObjectSigningAlg',
    'softwareId',
    'softwareVersion',
    'softwareStatement',
    'softwareStatementJwt',
  ];
  for (const field of registrationOwned) delete (kept as Record<string, unknown>)[field];
  const record = {
    ...kept,
    ...fields,
    ...(keepsSecret ? { clientSecret: oldSecret } : {}),
    ...(issued.clientSecret ? { clientSecret: generatedSecretDigest(sealer, issued.clientSecret) } : {}),
    registrationAccessTokenDigest,
    updatedAt: new Date().toISOString(),
  } as ClientRecord;
  return { record: await clientsOf(store, tenant).upsert(record), issued };
}

/**
 * The dynamically registered client `clientId` of this tenant whose registration access token
 * is `token`; null for an unknown client, another client's token, or a client without one
 * (Admin API clients): the caller cannot tell these apart.
 */
export async function clientForToken(
  store: Store,
  tenant: string,
  clientId: string,
  token: string,
): Promise<ClientRecord | null> {
  const record = await clientsOf(store, tenant).findOne({ clientId });
  const stored = record?.registrationAccessTokenDigest;
  if (!record || typeof stored !== 'string') {
    storageDigest(token);
    return null;
  }
  const presented = Buffer.from(storageDigest(token));
  const expected = Buffer.from(stored);
  return presented.length === expected.length && timingSafeEqual(presented, expected) ? record : null;
}
