import type { ValidateFunction } from 'ajv';
import { ajv } from '../http/validation.js';
import type { CollectionSpec, Store, StoredDoc, TenantCollection } from '../store/types.js';
import {
  CLIENT_SCHEMA,
  IDENTITY_PROVIDER_SCHEMA,
  INITIAL_ACCESS_TOKEN_SCHEMA,
  POLICY_DATA_SCHEMA,
  POLICY_RULE_SCHEMA,
  RESOURCE_SCHEMA,
  RESOURCE_SERVER_SCHEMA,
  RESOURCE_TYPE_SCHEMA,
  SUBJECT_SCHEMA,
} from './schemas.js';
import type {
  ClientRecord,
  IdentityProviderRecord,
  InitialAccessTokenRecord,
  PolicyDataRecord,
  PolicyRuleRecord,
  ResourceRecord,
  ResourceServerRecord,
  ResourceTypeRecord,
  SubjectRecord,
} from './types.js';
/**
 * The shared records: the eight collections the Admin API serves (one generic router, src/admin)
 * and the protocol modules read and write (clients, subjects, resources, policy rules, ...).
 * Field lists follow the spec's "Admin API objects" table. Every module reaches one of them
 * through its accessor below, so that each is declared to the store with the same unique keys
 * and indexes whoever touches it first.
 */

export interface CollectionDefinition {
  /** URL segment under /admin/api/. */
  path: string;
  /** Store collection name. */
  store: string;
  /** The field that addresses a record in the URL (`id` = internal numeric id). */
  pathKey: 'id' | 'idpId' | 'clientId';
  /** Fields unique within a tenant (each a separate key). */
  uniqueFields: string[];
  /** JSON schema of a create/replace body. */
  schema: Record<string, unknown>;
  /** Integer fields that must name an existing record of another collection in the same tenant. */
  references?: Record<string, string>;
  /** Fields, not unique, that a request's path finds records by: each indexed, so that a lookup costs the same however many records there are. */
  lookupFields?: string[];
  /** Fields never returned in a response; a replace that leaves one out keeps its stored value. */
  secretFields?: string[];
  /**
   * Fields only the server writes (a client's `tokenEpoch`, src/oauth/shared/owned-artefacts.ts):
   * no body may carry them (they are not in the schema), no answer shows them, a replace keeps them.
   */
  serverKept?: string[];
  /** Secret fields Arbiter must read back: stored sealed (src/store/sealed.ts), never in clear. */
  sealedFields?: string[];
  /** A bearer token generated at creation: shown once as `shownAs`, stored only as its digest in `digestField`. */
  issuedToken?: { digestField: string; shownAs: string };
  /** Fields filled in when absent. */
  defaults?: Record<string, unknown>;
  /**
   * URI fields the Admin API checks as dynamic registration checks a client's metadata (its one
   * validator, src/oauth/register/redirect-uri.ts): `redirect` as redirect URIs (each of a list),
   * `page` as a client's web pages (client_uri, logo_uri, …), `jwks` as its JWK Set's URI.
   */
  registeredUris?: Record<string, 'redirect' | 'page' | 'jwks' | 'notification'>;
  /** Fields holding a client's JWK Set (`{ keys: [...] }`): public keys only, as dynamic registration takes them (publicKeySetProblem). */
  publicKeySets?: string[];
  /**
   * The fields that decide where the kept secret `secret` is sent (an upstream IdP's issuer, whose
   * metadata names its token endpoint, and that endpoint): a replace that changes one must give the
   * secret again, so that a stored secret only ever goes where whoever gave it meant it to.
   */
  secretDestinations?: { secret: string; fields: string[] };
  /**
   * A secret given in clear (or already as a BCrypt hash) and stored only as its BCrypt hash, in
   * `field`; `generate` names the body flag that has the server choose one instead, answered this
   * once as `shownAs`, and `generatedOnlyWith` the fields a record must have for that.
   */
  hashedSecret?: { field: string; generate: string; shownAs: string; generatedOnlyWith: Record<string, unknown> };
  /**
   * Records may be `mode: "shadow"` (a candidate beside the live policy, see src/policy/shadow): a
   * shadow keeps its unique `field` (a rule's path) in `storedAs` instead, so that it can stand
   * beside the live record of the same path, one shadow per path.
   */
  shadow?: { field: string; storedAs: string };
  /** The string fields a list's `q` searches (a case-insensitive substring): the record's key and names. */
  searchFields: string[];
  /** How the operators' console presents the collection (src/admin/console): data, not code. */
  console?: ConsoleHints;
}

/**
 * What the console's forms and lists make of a collection beyond its schema. Enums already are
 * choices (a select; a list of enum values: checkboxes) and `references` lists of the records named.
 */
export interface ConsoleHints {
  /**
   * Fields the form never shows: set by the server or by dynamic registration, not by an operator.
   * An edit sends their stored values back unchanged, so that a replace keeps them.
   */
  hidden?: string[];
  /** The fields the form shows first, in this order; the others follow in the schema's order. */
  order?: string[];
  /** Fields the form folds under "More settings" (rarely changed); the others come first. */
  advanced?: string[];
  /** The list's columns besides the key (pathKey), in order (default: the first few scalar fields). */
  columns?: string[];
  /** Fields shown only while another field has one of the values given (a secret only for a confidential client). */
  shownWhen?: Record<string, { field: string; values: unknown[] }>;
  /** A line under a field's label, saying what it is for. */
  hints?: Record<string, string>;
}

export const COLLECTIONS: CollectionDefinition[] = [
  {
    path: 'identity-providers',
    store: 'identity_providers',
    searchFields: ['idpId', 'name', 'issuer'],
    console: {
      columns: ['name', 'issuer', 'enabled'],
      // Discovered from the issuer's metadata when left empty.
      advanced: [
        'sharedCallback',
        'authorizationEndpoint',
        'tokenEndpoint',
        'userinfoEndpoint',
        'jwksUri',
        'ssfIssuer',
        'ssfJwksUri',
        'ssfAudience',
        'ssfPushSecret',
      ],
      hints: {
        idpId: 'Left empty, one is generated. Register {issuer}/idp/callback/{idpId} at the provider.',
        issuer: 'The endpoints below are discovered from its metadata when left empty.',
        ssfIssuer:
          'A Shared Signals transmitter that pushes session-revoked and account-disabled events for its users to {issuer}/idp/ssf-events.',
        ssfJwksUri: "Left empty: the jwks_uri of the transmitter's /.well-known/ssf-configuration.",
        ssfAudience: "The aud its events name; left empty: this tenant's issuer.",
        ssfPushSecret: 'The bearer token the transmitter sends with each push.',
      },
    },
    pathKey: 'idpId',
    uniqueFields: ['idpId'],
    secretFields: ['clientSecret', 'ssfPushSecret'],
    sealedFields: ['clientSecret', 'ssfPushSecret'],
    // openid-client sends the secret to the token endpoint, the issuer's metadata's unless tokenEndpoint overrides it.
    secretDestinations: { secret: 'clientSecret', fields: ['issuer', 'tokenEndpoint'] },
    defaults: { enabled: true },
    schema: IDENTITY_PROVIDER_SCHEMA,
  },
  {
    path: 'resource-servers',
    store: 'resource_servers',
    searchFields: ['resourceIndicator', 'name'],
    console: {
      columns: ['resourceIndicator', 'name', 'enabled'],
      advanced: ['capability', 'typeUris', 'accessTokenFormat'],
    },
    pathKey: 'id',
    uniqueFields: ['resourceIndicator'],
    references: { clientId: 'clients' },
    defaults: { enabled: true },
    schema: RESOURCE_SERVER_SCHEMA,
  },
  {
    path: 'resource-types',
    store: 'resource_types',
    searchFields: ['typeUri', 'name'],
    console: { columns: ['typeUri', 'name', 'enabled'] },
    pathKey: 'id',
    uniqueFields: ['typeUri'],
    references: { parentTypeId: 'resource_types' },
    defaults: { enabled: true },
    schema: RESOURCE_TYPE_SCHEMA,
  },
  {
    path: 'resources',
    store: 'resources',
    searchFields: ['resourceIdentifier'],
    console: { columns: ['resourceIdentifier', 'resourceServerId', 'resourceTypeId'] },
    pathKey: 'id',
    uniqueFields: [],
    references: { resourceServerId: 'resource_servers', resourceTypeId: 'resource_types', ownerSubjectId: 'subjects' },
    // A request's `resource` that names no resource server is looked up here (resolveResource):
    // unindexed, each /token with one scanned the tenant's resources (found 2026-11-29: 185 ms at 100,000).
    lookupFields: ['resourceIdentifier'],
    schema: RESOURCE_SCHEMA,
  },
  {
    path: 'clients',
    store: 'clients',
    searchFields: ['clientId', 'clientName'],
    console: {
      columns: ['clientName', 'clientType', 'enabled'],
      order: [
        'clientId',
        'clientName',
        'clientType',
        'clientSecret',
        'tokenEndpointAuthMethod',
        'grantTypes',
        'redirectUris',
        'scopes',
      ],
      // Dynamic registration's record of itself (RFC 7591/7592): never an operator's to edit.
      hidden: [
        'registrationType',
        'registrationAccessTokenDigest',
        'softwareStatement',
        'softwareStatementJwt',
        'clientIdIssuedAt',
      ],
      advanced: [
        'postLogoutRedirectUris',
        'backchannelLogoutUri',
        'backchannelLogoutSessionRequired',
        'profile',
        'responseTypes',
        'requirePushedAuthorizationRequests',
        'jwksUri',
        'jwks',
        'requestObjectSigningAlg',
        'introspectionSignedResponseAlg',
        'tlsClientAuthSubjectDn',
        'tlsClientAuthSanDns',
        'tlsClientAuthSanUri',
        'tlsClientAuthSanIp',
        'tlsClientAuthSanEmail',
        'tlsClientCertificateBoundAccessTokens',
        'dpopBoundAccessTokens',
        'grantedResources',
        'clientUri',
        'logoUri',
        'tosUri',
        'policyUri',
        'contacts',
        'softwareId',
        'softwareVersion',
      ],
      shownWhen: { clientSecret: { field: 'clientType', values: ['confidential'] } },
      hints: {
        clientType:
          'Confidential clients authenticate with a secret or a key; public ones (apps in a browser or on a device) cannot keep one.',
        tokenEndpointAuthMethod:
          'How it authenticates at /token; not set: client_secret_basic for a confidential client.',
        scopes: 'The scopes it may ask for; the policy decides what it gets.',
      },
    },
    pathKey: 'clientId',
    uniqueFields: ['clientId'],
    // The registration access token's digest is as much a credential's trace as the secret's hash.
    secretFields: ['clientSecret', 'registrationAccessTokenDigest'],
    // Moved on by each revocation of the client's tokens; a token made under an earlier one is dead.
    // A rotated secret's grace (POST /clients/{clientId}/secret) survives a replace; it ends by itself.
    serverKept: ['tokenEpoch', 'secretGrace'],
    hashedSecret: {
      field: 'clientSecret',
      generate: 'generateClientSecret',
      shownAs: 'generatedClientSecret',
      generatedOnlyWith: { clientType: 'confidential' },
    },
    registeredUris: {
      redirectUris: 'redirect',
      postLogoutRedirectUris: 'redirect',
      clientUri: 'page',
      logoUri: 'page',
      tosUri: 'page',
      policyUri: 'page',
      jwksUri: 'jwks',
      backchannelLogoutUri: 'notification',
    },
    publicKeySets: ['jwks'],
    defaults: { enabled: true },
    schema: CLIENT_SCHEMA,
  },
  {
    // Initial access tokens for dynamic registration (RFC 7591 §3): the token is shown once, in
    // the 201 of its creation, and stored only as its digest.
    path: 'initial-access-tokens',
    store: 'initial_access_tokens',
    searchFields: ['name'],
    console: { columns: ['name', 'uses', 'used'] },
    pathKey: 'id',
    uniqueFields: ['tokenDigest'],
    secretFields: ['tokenDigest'],
    issuedToken: { digestField: 'tokenDigest', shownAs: 'token' },
    defaults: { used: 0 },
    schema: INITIAL_ACCESS_TOKEN_SCHEMA,
  },
  {
    path: 'subjects',
    store: 'subjects',
    searchFields: ['subjectId', 'name', 'email', 'preferredUsername'],
    console: { columns: ['subjectId', 'name', 'email'] },
    pathKey: 'id',
    uniqueFields: ['subjectId'],
    references: { identityProviderId: 'identity_providers' },
    schema: SUBJECT_SCHEMA,
  },
  {
    path: 'policy-rules',
    store: 'policy_rules',
    // A shadow keeps its path as shadowPath (see `shadow`): found by it too.
    searchFields: ['path', 'shadowPath'],
    console: {
      columns: ['path', 'kind', 'enabled', 'version', 'mode'],
      order: ['path', 'kind', 'content', 'enabled'],
      advanced: ['digest'],
      hints: {
        version: 'Empty: the rule is live. A version keeps it out of the bundle (a draft).',
        mode: 'Shadow: evaluated beside the live rule of its path, deciding nothing until promoted (Policy changes).',
      },
    },
    pathKey: 'id',
    uniqueFields: ['path'],
    shadow: { field: 'path', storedAs: 'shadowPath' },
    // A rule without a version is a live one (null); a versioned rule is kept out of the bundle.
    defaults: { enabled: true, digest: null, version: null },
    schema: POLICY_RULE_SCHEMA,
  },
  {
    path: 'policy-data',
    store: 'policy_data',
    searchFields: ['dataKey', 'shadowDataKey'],
    console: {
      columns: ['dataKey', 'version', 'mode'],
      order: ['dataKey', 'payload'],
      hints: {
        version: 'Empty: the entry is in the bundle. A version keeps it out (a draft).',
        schema:
          'Optional JSON Schema that data.<dataKey> must match (no pattern or format); a write that breaks it is refused.',
        mode: 'Shadow: evaluated beside the live entry of its key, deciding nothing until promoted (Policy changes).',
      },
    },
    pathKey: 'id',
    uniqueFields: ['dataKey'],
    shadow: { field: 'dataKey', storedAs: 'shadowDataKey' },
    defaults: { version: null },
    schema: POLICY_DATA_SCHEMA,
  },
];

export function definitionFor(path: string): CollectionDefinition | undefined {
  return COLLECTIONS.find((definition) => definition.path === path);
}

/**
 * How a shared collection is declared to the store: unique keys within a tenant, each indexed, an
 * index on each reference, which hot paths look records up by (the resource server of an
 * introspecting client) and deletions follow, then by id, so that the records of one referenced
 * record are also read a page at a time (an identity provider's users, when it is disabled), and
 * one on each lookup field.
 */
export function storeSpecOf(definition: CollectionDefinition): CollectionSpec {
  const unique = [...definition.uniqueFields, ...(definition.shadow ? [definition.shadow.storedAs] : [])];
  const references = Object.keys(definition.references ?? {}).filter((field) => !unique.includes(field));
  return {
    name: definition.store,
    uniqueKeys: unique.map((field) => [field]),
    // `id` first: every list of the Admin API goes by ascending id, a page at a time.
    indexes: ['id', ...unique, ...references.map((field) => [field, 'id']), ...(definition.lookupFields ?? [])],
  };
}

/** A record as stored: a shadow's unique field moved to where shadows keep it (see `CollectionDefinition.shadow`). */
export function storedForm<T extends Record<string, unknown>>(definition: CollectionDefinition, record: T): T {
  const { shadow } = definition;
  if (!shadow || record.mode !== 'shadow' || !(shadow.field in record)) return record;
  const { [shadow.field]: key, ...rest } = record;
  return { ...rest, [shadow.storedAs]: key } as T;
}

/** A record as the API shows it and the policy reads it: a shadow's unique field back under its name. */
export function presentedForm<T extends Record<string, unknown>>(definition: CollectionDefinition, record: T): T {
  const { shadow } = definition;
  if (!shadow || !(shadow.storedAs in record)) return record;
  const { [shadow.storedAs]: key, ...rest } = record;
  return { ...rest, [shadow.field]: key } as T;
}

const fieldValidators = new Map<string, ValidateFunction>();

/**
 * Whether the collection's schema takes `value` for `field`: what a writer reads from elsewhere and
 * may leave out (a metadata document's display fields) is kept only then, the record never refused for it.
 */
export function schemaTakes(definition: CollectionDefinition, field: string, value: unknown): boolean {
  const key = `${definition.path}\u0000${field}`;
  let validate = fieldValidators.get(key);
  if (!validate) {
    const property = (definition.schema.properties as Record<string, object> | undefined)?.[field];
    if (!property) return false;
    validate = ajv.compile(property);
    fieldValidators.set(key, validate);
  }
  return validate(value);
}

/** The definition of the shared collection stored under `name` (what `references` name). */
export function definitionOfStore(name: string): CollectionDefinition | undefined {
  return COLLECTIONS.find((definition) => definition.store === name);
}

/** A shared collection of one tenant, as every reader and writer opens it, typed by its schema (./types.ts). */
export interface RecordAccessor<T extends StoredDoc> {
  (store: Store, tenant: string): TenantCollection<T>;
  /** As declared to the store; `spec.name` also names the collection's id sequence. */
  readonly spec: CollectionSpec;
}

function accessorAt<T extends StoredDoc>(path: string): RecordAccessor<T> {
  const definition = definitionFor(path);
  if (!definition) throw new Error(`no shared collection at ${path}`);
  const spec = storeSpecOf(definition);
  return Object.assign((store: Store, tenant: string) => store.collection<T>(spec, tenant), { spec });
}

export const identityProviderRecords = accessorAt<IdentityProviderRecord>('identity-providers');
export const resourceServerRecords = accessorAt<ResourceServerRecord>('resource-servers');
export const resourceTypeRecords = accessorAt<ResourceTypeRecord>('resource-types');
export const resourceRecords = accessorAt<ResourceRecord>('resources');
export const clientRecords = accessorAt<ClientRecord>('clients');
export const initialAccessTokenRecords = accessorAt<InitialAccessTokenRecord>('initial-access-tokens');
export const subjectRecords = accessorAt<SubjectRecord>('subjects');
export const policyRuleRecords = accessorAt<PolicyRuleRecord>('policy-rules');
export const policyDataRecords = accessorAt<PolicyDataRecord>('policy-data');
