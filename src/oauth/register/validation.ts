import { createPublicKey } from 'node:crypto';
import { registrableRedirectUriProblem, webUriProblem } from './redirect-uri.js';
import { HttpError } from '../../http/errors.js';
import { CLIENT_GRANT_TYPES, REQUEST_OBJECT_SIGNING_ALGS, type ClientRecord } from '../../catalog/index.js';

type GrantType = (typeof CLIENT_GRANT_TYPES)[number];
export const AUTH_METHODS = ['none', 'client_secret_post', 'client_secret_basic', 'private_key_jwt'] as const;
export const DEFAULT_GRANT_TYPES: GrantType[] = ['authorization_code', 'refresh_token'];
export const DEFAULT_AUTH_METHOD = 'client_secret_basic';

/** Client metadata (RFC 7591 names) once validated and defaulted: exactly what gets registered. */
export interface ValidatedMetadata {
  redirect_uris: string[];
  token_endpoint_auth_method: (typeof AUTH_METHODS)[number];
  grant_types: GrantType[];
  response_types: 'code'[];
  client_name?: string;
  client_uri?: string;
  logo_uri?: string;
  tos_uri?: string;
  policy_uri?: string;
  contacts?: string[];
  scope?: string;
  jwks_uri?: string;
  jwks?: { keys: Record<string, unknown>[] };
  software_id?: string;
  software_version?: string;
  /** RFC 9126 §6. */
  require_pushed_authorization_requests?: boolean;
  /** OIDC Dynamic Client Registration §2, RFC 9101 §9: one of REQUEST_OBJECT_SIGNING_ALGS. */
  request_object_signing_alg?: ClientRecord['requestObjectSigningAlg'];
}

/** The metadata fields Arbiter registers; every other member of a request is ignored (RFC 7591 §2). */
export const REGISTERED_FIELDS = [
  'redirect_uris',
  'token_endpoint_auth_method',
  'grant_types',
  'response_types',
  'client_name',
  'client_uri',
  'logo_uri',
  'tos_uri',
  'policy_uri',
  'contacts',
  'scope',
  'jwks_uri',
  'jwks',
  'software_id',
  'software_version',
  'require_pushed_authorization_requests',
  'request_object_signing_alg',
] as const;

const MAX_STRING = 2048;
const MAX_URIS = 100;
const MAX_KEYS = 20;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** ajv-formats' e-mail syntax (the Admin API's), with a dotted domain. */
const EMAIL =
  /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/i;
/** RFC 6749 scope-token characters. */
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/;
/** JWK members that only a private or symmetric key has. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

const metadataError = (field: string, description: string) =>
  new HttpError(400, 'invalid_client_metadata', `${field} ${description}`, { field });
const redirectError = (description: string) =>
  new HttpError(400, 'invalid_redirect_uri', `redirect_uris ${description}`, { field: 'redirect_uris' });

/**
 * Validates a registration request (RFC 7591 §2) and fills in the defaults. Throws a 400
 * `invalid_redirect_uri` or `invalid_client_metadata` whose description names the field.
 */
export function validateMetadata(body: Record<string, unknown>): ValidatedMetadata {
  const authMethod =
    optional(body, 'token_endpoint_auth_method', (value) => {
      if (typeof value !== 'string' || !(AUTH_METHODS as readonly string[]).includes(value))
        throw metadataError('token_endpoint_auth_method', `must be one of ${AUTH_METHODS.join(', ')}`);
      return value as ValidatedMetadata['token_endpoint_auth_method'];
    }) ?? DEFAULT_AUTH_METHOD;
  const grantTypes = optional(body, 'grant_types', (value) => grantTypesOf(value)) ?? [...DEFAULT_GRANT_TYPES];
  const responseTypes =
    optional(body, 'response_types', (value) => {
      const types = uniqueStrings(value, 'response_types', 10);
      if (types.some((type) => type !== 'code')) throw metadataError('response_types', "may only contain 'code'");
      return types as 'code'[];
    }) ?? (grantTypes.includes('authorization_code') ? ['code' as const] : []);
  if (responseTypes.includes('code') !== grantTypes.includes('authorization_code')) {
    throw metadataError('response_types', "must be ['code'] exactly when grant_types contains authorization_code");
  }
  if (authMethod === 'none' && grantTypes.includes('client_credentials'))
    throw metadataError('grant_types', 'client_credentials needs a confidential token_endpoint_auth_method');

  const metadata: ValidatedMetadata = {
    redirect_uris: redirectUris(body.redirect_uris),
    token_endpoint_auth_method: authMethod,
    grant_types: grantTypes,
    response_types: responseTypes,
  };
  assign(
    metadata,
    'client_name',
    optional(body, 'client_name', (value) => text(value, 'client_name')),
  );
  for (const field of ['client_uri', 'logo_uri', 'tos_uri', 'policy_uri'] as const) {
    assign(
      metadata,
      field,
      optional(body, field, (value) => webUri(value, field, 'page')),
    );
  }
  assign(
    metadata,
    'contacts',
    optional(body, 'contacts', (value) => {
      const contacts = uniqueStrings(value, 'contacts', 20);
      if (contacts.some((contact) => contact.length > 254 || !EMAIL.test(contact)))
        throw metadataError('contacts', 'must be e-mail addresses');
      return contacts;
    }),
  );
  assign(
    metadata,
    'scope',
    optional(body, 'scope', (value) => {
      if (typeof value !== 'string' || value.length > MAX_STRING || (value !== '' && !SCOPE.test(value)))
        throw metadataError('scope', 'must be a space-separated list of scope tokens');
      return value === '' ? undefined : value;
    }),
  );
  assign(
    metadata,
    'jwks_uri',
    optional(body, 'jwks_uri', (value) => webUri(value, 'jwks_uri', 'jwks')),
  );
  assign(
    metadata,
    'jwks',
    optional(body, 'jwks', (value) => jwkSet(value)),
  );
  assign(
    metadata,
    'software_id',
    optional(body, 'software_id', (value) => {
      if (typeof value !== 'string' || !UUID.test(value)) throw metadataError('software_id', 'must be a UUID');
      return value.toLowerCase();
    }),
  );
  assign(
    metadata,
    'software_version',
    optional(body, 'software_version', (value) => text(value, 'software_version')),
  );

  assign(
    metadata,
    'require_pushed_authorization_requests',
    optional(body, 'require_pushed_authorization_requests', (value) => {
      if (typeof value !== 'boolean') throw metadataError('require_pushed_authorization_requests', 'must be a boolean');
      return value;
    }),
  );
  assign(
    metadata,
    'request_object_signing_alg',
    optional(body, 'request_object_signing_alg', (value) => {
      if (typeof value !== 'string' || !(REQUEST_OBJECT_SIGNING_ALGS as readonly string[]).includes(value))
        throw metadataError('request_object_signing_alg', `must be one of ${REQUEST_OBJECT_SIGNING_ALGS.join(', ')}`);
      return value as ValidatedMetadata['request_object_signing_alg'];
    }),
  );

  if (metadata.jwks && metadata.jwks_uri) throw metadataError('jwks', 'and jwks_uri must not both be present');
  if (metadata.request_object_signing_alg && !metadata.jwks_uri && !metadata.jwks?.keys.length) {
    throw metadataError('request_object_signing_alg', 'needs jwks or jwks_uri to verify request objects with');
  }
  if (authMethod === 'private_key_jwt' && !metadata.jwks_uri && !metadata.jwks?.keys.length) {
    throw metadataError('token_endpoint_auth_method', 'private_key_jwt needs jwks or jwks_uri');
  }
  return metadata;
}

/** A member's value through `check`; undefined when absent or null (null means "not given", RFC 7591 §2). */
function optional<T>(body: Record<string, unknown>, field: string, check: (value: unknown) => T): T | undefined {
  const value = body[field];
  return value === undefined || value === null ? undefined : check(value);
}

function assign<K extends keyof ValidatedMetadata>(
  metadata: ValidatedMetadata,
  field: K,
  value: ValidatedMetadata[K] | undefined,
): void {
  if (value !== undefined) metadata[field] = value;
}

function redirectUris(value: unknown): string[] {
  if (value === undefined || value === null) throw redirectError('is required');
  if (!Array.isArray(value) || value.length === 0) throw redirectError('must be a non-empty array');
  if (value.length > MAX_URIS) throw redirectError(`must not list more than ${MAX_URIS} URIs`);
  const uris = value.map((uri) => {
    const problem = typeof uri === 'string' ? registrableRedirectUriProblem(uri) : 'must be absolute URIs';
    if (problem) throw redirectError(problem);
    return uri as string;
  });
  return [...new Set(uris)];
}

function grantTypesOf(value: unknown): GrantType[] {
  const grants = uniqueStrings(value, 'grant_types', 10);
  if (grants.length === 0) throw metadataError('grant_types', 'must not be empty');
  const unsupported = grants.filter((grant) => !(CLIENT_GRANT_TYPES as readonly string[]).includes(grant));
  if (unsupported.length)
    throw metadataError(
      'grant_types',
      `contains unsupported grant types: ${unsupported.map((grant) => grant.slice(0, 100)).join(', ')}`,
    );
  return grants as GrantType[];
}

function uniqueStrings(value: unknown, field: string, max: number): string[] {
  if (
    !Array.isArray(value) ||
    value.length > max ||
    value.some((entry) => typeof entry !== 'string' || entry.length === 0 || entry.length > MAX_STRING)
  ) {
    throw metadataError(field, `must be an array of at most ${max} non-empty strings`);
  }
  return [...new Set(value as string[])];
}

function text(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length > MAX_STRING)
    throw metadataError(field, `must be a string of at most ${MAX_STRING} characters`);
  return value;
}

/** An absolute http(s) URI (`jwks`: https, no fragment), as written. */
function webUri(value: unknown, field: string, kind: 'page' | 'jwks'): string {
  const problem = typeof value === 'string' ? webUriProblem(value, kind) : 'must be an absolute URI';
  if (problem) throw metadataError(field, problem);
  return value as string;
}

/** An inline JWK Set of public keys that Node can use (a key it cannot import would make the client unusable). */
function jwkSet(value: unknown): { keys: Record<string, unknown>[] } {
  const keys = (value as { keys?: unknown })?.keys;
  if (typeof value !== 'object' || Array.isArray(value) || !Array.isArray(keys))
    throw metadataError('jwks', 'must be a JWK Set ({"keys": [...]})');
  if (keys.length > MAX_KEYS) throw metadataError('jwks', `must not hold more than ${MAX_KEYS} keys`);
  return {
    keys: keys.map((key) => {
      if (
        typeof key !== 'object' ||
        key === null ||
        Array.isArray(key) ||
        typeof (key as { kty?: unknown }).kty !== 'string'
      )
        throw metadataError('jwks', 'keys must be JWK objects');
      if (PRIVATE_MEMBERS.some((member) => member in key))
        throw metadataError('jwks', 'must hold public keys only (no private or symmetric key members)');
      for (const member of ['kid', 'alg', 'use'] as const) {
        const memberValue = (key as Record<string, unknown>)[member];
        if (memberValue !== undefined && (typeof memberValue !== 'string' || memberValue.length > 256))
          throw metadataError('jwks', `key member ${member} must be a string`);
      }
      try {
        createPublicKey({ key: key as never, format: 'jwk' });
      } catch {
        throw metadataError('jwks', 'holds a key that is not a valid public JWK');
      }
      return key as Record<string, unknown>;
    }),
  };
}
