/**
 * The shared records' TypeScript types, derived from their JSON Schemas (./schemas.ts) with
 * json-schema-to-ts: the schema the Admin API, the CLI, dynamic registration and client ID
 * metadata documents are validated by is the type every reader sees. Only what the server itself
 * adds is written here: the store's keys and times, and each collection's server-kept fields.
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type * as schemas from './schemas.js';

/** What every stored record has besides its body: its key, its tenant, its times (a record seeded by 0.1 has none). */
type Kept = { id: number; tenantId: string | null; createdAt?: string; updatedAt?: string };

/**
 * A record as stored: its schema's body (less the body-only `Flags`), the store's fields, the
 * fields its collection's `defaults` always fill (`Defaulted`, required here), and `ServerFields`.
 */
type Stored<
  Schema extends JSONSchema,
  ServerFields extends object = object,
  Defaulted extends keyof FromSchema<Schema> = never,
  Flags extends keyof FromSchema<Schema> = never,
> = Omit<FromSchema<Schema>, 'tenantId' | Defaulted | Flags> &
  Required<Pick<FromSchema<Schema>, Defaulted>> &
  Kept &
  ServerFields;

export type ClientRecord = Stored<
  typeof schemas.CLIENT_SCHEMA,
  {
    /** How many times its tokens were revoked (absent: never); only the server writes it (src/oauth/shared/owned-artefacts.ts). */
    tokenEpoch?: number;
    /** A client ID metadata document's record is a cache entry: the store hides it after this instant (epoch ms). */
    expiresAt?: number;
    /** The secret a rotation replaced, still valid for a while; only the server writes it (src/oauth/clients/secrets.ts). */
    secretGrace?: SecretGrace | null;
  },
  never,
  'generateClientSecret'
>;

/**
 * A rotated client secret's grace: the `previous` secret (as kept: a keyed digest or a BCrypt
 * hash, never in clear) stays valid until `until` (epoch ms), and only while the record's secret
 * is still `successor`, the one the rotation made: any later change of the secret ends it.
 */
interface SecretGrace {
  previous: string;
  until: number;
  successor: string;
}

/** The fields of a client a writer gives: what the store and the repository add left out. */
export type ClientFields = Omit<ClientRecord, keyof Kept | 'tokenEpoch' | 'secretGrace'>;

export type IdentityProviderRecord = Stored<typeof schemas.IDENTITY_PROVIDER_SCHEMA, object, 'idpId'>;
export type ResourceServerRecord = Stored<typeof schemas.RESOURCE_SERVER_SCHEMA>;
export type ResourceTypeRecord = Stored<typeof schemas.RESOURCE_TYPE_SCHEMA>;
export type ResourceRecord = Stored<typeof schemas.RESOURCE_SCHEMA>;
export type InitialAccessTokenRecord = Stored<
  typeof schemas.INITIAL_ACCESS_TOKEN_SCHEMA,
  /** The token's digest (the token is shown once), and how many registrations it made. */
  { tokenDigest: string; used: number }
>;
export type SubjectRecord = Stored<
  typeof schemas.SUBJECT_SCHEMA,
  /** Written by a sign-in from the upstream provider's claims. */
  { emailVerified?: boolean }
>;
/** A shadow keeps its path as `shadowPath` in the store (CollectionDefinition.shadow); read back, it is `path` again. */
export type PolicyRuleRecord = Stored<typeof schemas.POLICY_RULE_SCHEMA, object, 'enabled' | 'version'>;
export type PolicyDataRecord = Stored<typeof schemas.POLICY_DATA_SCHEMA, object, 'version'>;
