import type { ErrorObject, ValidateFunction } from 'ajv';
import {
  definitionFor,
  publicKeySetProblem,
  registrableRedirectUriProblem,
  webUriProblem,
  type ClientRecord,
} from '../../catalog/index.js';
import { HttpError } from '../../http/errors.js';
import { ajv } from '../../http/validation.js';
import { memberOfField, recordFieldsOf, type RegisteredMetadata } from '../clients/metadata.js';

const DEFAULT_GRANT_TYPES: NonNullable<ClientRecord['grantTypes']> = ['authorization_code', 'refresh_token'];
const DEFAULT_AUTH_METHOD = 'client_secret_basic';

/** Client metadata (RFC 7591 names) once validated and defaulted: exactly what gets registered. */
export type ValidatedMetadata = RegisteredMetadata &
  Required<
    Pick<RegisteredMetadata, 'redirect_uris' | 'token_endpoint_auth_method' | 'grant_types' | 'response_types'>
  > & {
    /** Asked for, not registered: the `register` decision grants the scopes. */
    scope?: string;
  };

const MAX_URIS = 100;
/** RFC 6749 scope-token characters. */
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/;
/** What a format of the catalog's schema means, in a registration error (`software_id must be a UUID`). */
const FORMAT_WORDS: Record<string, string> = { uuid: 'a UUID', email: 'e-mail addresses', uri: 'absolute URIs' };

const metadataError = (field: string, description: string) =>
  new HttpError(400, 'invalid_client_metadata', `${field} ${description}`, { field });
const redirectError = (description: string) =>
  new HttpError(400, 'invalid_redirect_uri', `redirect_uris ${description}`, { field: 'redirect_uris' });

/**
 * Validates a registration request (RFC 7591 §2) and fills in the defaults. Its members are read
 * as the client record they become (clients/metadata.ts) and validated by the catalog's client
 * schema, the one validator every client is written through (src/records); the rules only
 * registration has are the named checks around it. Throws a 400 `invalid_redirect_uri` or
 * `invalid_client_metadata` whose description names the member.
 */
export function validateMetadata(body: Record<string, unknown>): ValidatedMetadata {
  const given = givenMembers(body);
  checkRedirectUris(given.redirect_uris);
  checkWebUris(given);
  const scope = scopeOf(given.scope);
  checkAgainstCatalog(given);
  const { scope: _scope, ...registered } = given;
  const metadata = withDefaults(registered as RegisteredMetadata);
  for (const check of CROSS_MEMBER_CHECKS) check(metadata);
  if (metadata.jwks) checkPublicKeys(metadata.jwks.keys);
  return scope === undefined ? metadata : { ...metadata, scope };
}

/**
 * The members Arbiter registers (and `scope`); null means "not given" (RFC 7591 §2), any other
 * member is ignored, and is not what the `register` decision is asked about either (its
 * `input.request.parameters`): a member nobody reads is no one's to record.
 */
export function givenMembers(body: Record<string, unknown>): Record<string, unknown> {
  const names = [...Object.values(memberOfField), 'scope'];
  return Object.fromEntries(
    names
      .filter((member) => body[member] !== undefined && body[member] !== null)
      .map((member) => [member, body[member]]),
  );
}

/** Registration's own rule (OAuth 2.1 §2.3.1, RFC 9700 §4.1.3): at least one redirect URI, each registrable. */
function checkRedirectUris(value: unknown): void {
  if (value === undefined) throw redirectError('is required');
  if (!Array.isArray(value) || value.length === 0) throw redirectError('must be a non-empty array');
  if (value.length > MAX_URIS) throw redirectError(`must not list more than ${MAX_URIS} URIs`);
  for (const uri of value) {
    const problem = typeof uri === 'string' ? registrableRedirectUriProblem(uri) : 'must be absolute URIs';
    if (problem) throw redirectError(problem);
  }
}

/** The client's pages (http or https) and its JWK Set's URI (https, no fragment), as the catalog's registeredUris check them. */
function checkWebUris(given: Record<string, unknown>): void {
  for (const [field, kind] of Object.entries(definitionFor('clients')!.registeredUris ?? {})) {
    const member = memberOfField[field];
    const value = member === undefined ? undefined : given[member];
    if (kind === 'redirect' || value === undefined) continue;
    const problem = typeof value === 'string' ? webUriProblem(value, kind) : 'must be an absolute URI';
    if (problem) throw metadataError(member!, problem);
  }
}

/** `scope` (asked for, not stored): RFC 6749 scope tokens, space-separated; empty is none. */
function scopeOf(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > 2048 || (value !== '' && !SCOPE.test(value)))
    throw metadataError('scope', 'must be a space-separated list of scope tokens');
  return value === '' ? undefined : value;
}

let catalogClient: ValidateFunction | undefined;

/** The members as the client record they become, against the catalog's client schema; its first error in RFC 7591 names. */
function checkAgainstCatalog(given: Record<string, unknown>): void {
  catalogClient ??= ajv.compile(definitionFor('clients')!.schema);
  // The fields registration sets itself (the id, the type) as they will be: the schema requires them.
  const record = { ...recordFieldsOf(given as RegisteredMetadata), clientId: 'registering', clientType: 'public' };
  if (catalogClient(record)) return;
  const error = catalogClient.errors![0]!; // Ajv names at least one error when it refuses
  const [field, ...rest] = error.instancePath.split('/').filter(Boolean);
  const member = field === undefined ? field : (memberOfField[field] ?? field);
  const description = describe(error);
  if (member === 'redirect_uris') throw redirectError(description);
  throw new HttpError(400, 'invalid_client_metadata', `${[member, ...rest].join('.')} ${description}`, {
    field: member,
  });
}

function describe(error: ErrorObject): string {
  if (error.keyword === 'enum')
    return `must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
  if (error.keyword === 'format') {
    const format = (error.params as { format: string }).format;
    return `must be ${FORMAT_WORDS[format] ?? `in the ${format} format`}`;
  }
  return error.message ?? 'is invalid';
}

/** RFC 7591 §2's defaults; lists without repeats, a software_id in lower case. */
function withDefaults(given: RegisteredMetadata): ValidatedMetadata {
  const grantTypes = unique(given.grant_types) ?? [...DEFAULT_GRANT_TYPES];
  return {
    ...given,
    redirect_uris: unique(given.redirect_uris)!,
    token_endpoint_auth_method: given.token_endpoint_auth_method ?? DEFAULT_AUTH_METHOD,
    grant_types: grantTypes,
    response_types: unique(given.response_types) ?? (grantTypes.includes('authorization_code') ? ['code'] : []),
    ...(given.contacts ? { contacts: unique(given.contacts) } : {}),
    ...(given.software_id ? { software_id: given.software_id.toLowerCase() } : {}),
  };
}

function unique<T>(values: T[] | undefined): T[] | undefined {
  return values && [...new Set(values)];
}

/** The rules between members that registration holds a client to (each names the member it is about). */
const CROSS_MEMBER_CHECKS: ((metadata: ValidatedMetadata) => void)[] = [
  function responseTypesFollowGrants({ response_types, grant_types }) {
    if (grant_types.length === 0) throw metadataError('grant_types', 'must not be empty');
    if (response_types.includes('code') !== grant_types.includes('authorization_code'))
      throw metadataError('response_types', "must be ['code'] exactly when grant_types contains authorization_code");
  },
  function clientCredentialsNeedsConfidential({ token_endpoint_auth_method, grant_types }) {
    if (token_endpoint_auth_method === 'none' && grant_types.includes('client_credentials'))
      throw metadataError('grant_types', 'client_credentials needs a confidential token_endpoint_auth_method');
  },
  function oneKeySource({ jwks, jwks_uri }) {
    if (jwks && jwks_uri) throw metadataError('jwks', 'and jwks_uri must not both be present');
  },
  function requestObjectsNeedKeys(metadata) {
    if (metadata.request_object_signing_alg && !hasKeys(metadata))
      throw metadataError('request_object_signing_alg', 'needs jwks or jwks_uri to verify request objects with');
  },
  function privateKeyJwtNeedsKeys(metadata) {
    if (metadata.token_endpoint_auth_method === 'private_key_jwt' && !hasKeys(metadata))
      throw metadataError('token_endpoint_auth_method', 'private_key_jwt needs jwks or jwks_uri');
  },
];

function hasKeys(metadata: ValidatedMetadata): boolean {
  return Boolean(metadata.jwks_uri || metadata.jwks?.keys?.length);
}

/** An inline JWK Set of public keys that Node can use (the catalog's one check). */
function checkPublicKeys(keys: Record<string, unknown>[]): void {
  const problem = publicKeySetProblem(keys);
  if (problem) throw metadataError('jwks', problem);
}
