import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { definitionFor, type ClientFields } from '../../catalog/index.js';
import { HttpError } from '../../http/errors.js';
import type { Written } from '../../records/index.js';
import { storageDigest, type Sealer, type Store } from '../../store/index.js';
import { recordFieldsOf, REGISTERED_FIELDS } from '../clients/metadata.js';
import { clientsCollection, type ClientRecord } from '../clients/records.js';
import { clientRepository, STORE_FIELDS } from '../clients/repository.js';
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

/** Where the catalog shows a generated client secret this once (CollectionDefinition.hashedSecret). */
const GENERATED_SECRET = definitionFor('clients')!.hashedSecret!.shownAs;

/**
 * The registration's own fields, which an RFC 7592 update replaces (one it leaves out goes): every
 * RFC 7591 member a record keeps (clients/metadata.ts, so that a new member cannot be forgotten
 * here) and the software statement. Every other field of the record (enabled, post-logout URIs:
 * an operator's) is kept.
 */
const REGISTRATION_OWNED: readonly (keyof ClientFields)[] = [
  ...REGISTERED_FIELDS,
  'softwareStatement',
  'softwareStatementJwt',
];

export function generateRegistrationAccessToken(): string {
  return randomBytes(32).toString('base64url');
}

/** The registration's fields of a client record (what an update replaces), in the catalog's names. */
function registeredFields(
  metadata: ValidatedMetadata,
  grant: RegistrationGrant,
  statement: { jwt: string; read: SoftwareStatement } | null,
): Partial<ClientFields> {
  const fields: Partial<ClientFields> = {
    ...recordFieldsOf(metadata),
    clientType: metadata.token_endpoint_auth_method === 'none' ? 'public' : 'confidential',
    grantTypes: grant.grantTypes,
    responseTypes: grant.grantTypes.includes('authorization_code') ? ['code'] : [],
    scopes: grant.scopes,
    grantedResources: grant.grantedResources,
    softwareStatement: statement?.read.claims,
    softwareStatementJwt: statement?.jwt,
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/**
 * A write through the client repository (src/records), validated by the catalog's client schema
 * like an Admin API write; what that schema refuses is the registration's metadata error.
 */
async function throughRepository(write: () => Promise<Written<ClientRecord>>): Promise<Written<ClientRecord>> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof HttpError && error.status === 400)
      throw new HttpError(400, 'invalid_client_metadata', error.message, error.details);
    throw error;
  }
}

/** The credentials shown once: the generated secret (if any) and the new registration access token. */
function issuedOf(written: Written<ClientRecord>, registrationAccessToken: string): IssuedCredentials {
  const clientSecret = written.shownOnce[GENERATED_SECRET];
  return { registrationAccessToken, ...(clientSecret ? { clientSecret } : {}) };
}

/** Creates the client; returns it with the secret and registration access token in clear, this once. */
export async function createClient(
  store: Store,
  sealer: Sealer,
  tenantId: string | null,
  metadata: ValidatedMetadata,
  grant: RegistrationGrant,
  statement: { jwt: string; read: SoftwareStatement } | null,
): Promise<{ record: ClientRecord; issued: IssuedCredentials }> {
  const fields = registeredFields(metadata, grant, statement);
  const registrationAccessToken = generateRegistrationAccessToken();
  const written = await throughRepository(() =>
    clientRepository(store, sealer).createRecord(tenantId, {
      ...fields,
      clientId: randomUUID(),
      registrationType: 'dcr',
      ...(usesSecret(fields.tokenEndpointAuthMethod) ? { generateClientSecret: true } : {}),
      registrationAccessTokenDigest: storageDigest(registrationAccessToken),
      clientIdIssuedAt: Math.floor(Date.now() / 1000),
      tenantId,
    }),
  );
  return { record: written.record, issued: issuedOf(written, registrationAccessToken) };
}

/** RFC 7592 §2.2: a client the operator disabled may read its registration, not change it. */
export function disabledRegistration(): HttpError {
  return new HttpError(403, 'access_denied', 'the client is disabled: its registration may be read, not changed');
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
  existing: ClientRecord,
  metadata: ValidatedMetadata,
  grant: RegistrationGrant,
  statement: { jwt: string; read: SoftwareStatement } | null,
): Promise<{ record: ClientRecord; issued: IssuedCredentials } | null> {
  const fields = registeredFields(metadata, grant, statement);
  const registrationAccessToken = generateRegistrationAccessToken();
  const registrationAccessTokenDigest = storageDigest(registrationAccessToken);
  const clients = clientRepository(store, sealer);
  // Compare and set: of two updates with the same token, one wins and the other is refused.
  const claimed = await clients
    .collection(existing.tenantId)
    .update(
      existing.id,
      { registrationAccessTokenDigest },
      { registrationAccessTokenDigest: existing.registrationAccessTokenDigest as string },
    );
  if (!claimed) return null;
  // The record as it is now, not as it was read before the request's body came (its sender times
  // that): what an operator did meanwhile stands. Found 2026-11-30: a PUT whose body was held
  // while the client was disabled, its secret rotated or its tokens revoked wrote the read record
  // back, enabled, with its old secret and token epoch.
  const current = claimed as ClientRecord;
  if (current.enabled === false) {
    // The token it came with stays its own: a disabled client may still read its registration.
    await clients
      .collection(existing.tenantId)
      .update(
        existing.id,
        { registrationAccessTokenDigest: existing.registrationAccessTokenDigest },
        { registrationAccessTokenDigest },
      );
    throw disabledRegistration();
  }
  const keepsSecret =
    usesSecret(fields.tokenEndpointAuthMethod) &&
    current.tokenEndpointAuthMethod === fields.tokenEndpointAuthMethod &&
    typeof current.clientSecret === 'string';
  const kept: Record<string, unknown> = { ...current };
  for (const field of [...STORE_FIELDS, ...REGISTRATION_OWNED, 'clientSecret']) delete kept[field];
  const written = await throughRepository(() =>
    clients.replaceRecord(
      current.tenantId,
      current,
      {
        ...kept,
        ...fields,
        ...(keepsSecret ? { clientSecret: current.clientSecret } : {}),
        ...(usesSecret(fields.tokenEndpointAuthMethod) && !keepsSecret ? { generateClientSecret: true } : {}),
        registrationAccessTokenDigest,
        tenantId: current.tenantId,
      },
      // Every secret the client keeps is given: one left out (a move to `none`) goes.
      { keepOmittedSecrets: false },
    ),
  );
  return { record: written.record, issued: issuedOf(written, registrationAccessToken) };
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
  const record = await clientsCollection(store, tenant).findOne({ clientId });
  const stored = record?.registrationAccessTokenDigest;
  if (!record || typeof stored !== 'string') {
    storageDigest(token);
    return null;
  }
  const presented = Buffer.from(storageDigest(token));
  const expected = Buffer.from(stored);
  return presented.length === expected.length && timingSafeEqual(presented, expected) ? record : null;
}
