import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { oidcParams } from '../../../shared/oidc-params.js';

/** RFC 8693 §2.1: the grant type and the token type identifiers of §3. */
export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
export const ID_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id_token';
/** Known to RFC 8693 but not accepted as subject tokens here (spec: "not supported"). */
const REFUSED_TOKEN_TYPES = new Set([
  'urn:ietf:params:oauth:token-type:refresh_token',
  'urn:ietf:params:oauth:token-type:saml1',
  'urn:ietf:params:oauth:token-type:saml2',
  'urn:ietf:params:oauth:token-type:jwt',
]);

/** Every form parameter the grant reads (oidc-provider passes only these on). */
export const TOKEN_EXCHANGE_PARAMETERS = [
  'subject_token',
  'subject_token_type',
  'requested_token_type',
  'audience',
  'scope',
  'resource',
  'resource_type',
  'resource_types',
  'authorization_details',
  'actor_token',
  'actor_token_type',
];

export type SubjectTokenType = typeof ACCESS_TOKEN_TYPE | typeof ID_TOKEN_TYPE;

/**
 * Why each token type of RFC 8693 §3 other than an access token is not issued: Arbiter's access
 * tokens are opaque (not a JWT), ID tokens come from a sign-in, and an exchange never yields a
 * refresh token. Labelling an access token as one of these would mislead the client.
 */
const NOT_ISSUED = new Map<string, string>([
  ['urn:ietf:params:oauth:token-type:id_token', 'ID tokens are issued only at sign-in'],
  ['urn:ietf:params:oauth:token-type:jwt', 'access tokens of this server are opaque, not JWTs'],
  ['urn:ietf:params:oauth:token-type:refresh_token', 'a token exchange never issues a refresh token'],
]);

export interface ExchangeParameters {
  subjectToken: string;
  subjectTokenType: SubjectTokenType;
  /** The one type an exchange issues (RFC 8693 §2.2.1 issued_token_type): an access token. */
  requestedTokenType: typeof ACCESS_TOKEN_TYPE;
  /** RFC 8693 §2.1: the logical name of the target service; see decision.ts (exchangeTarget). */
  audience: string | null;
  scopes: string[];
  /** RFC 8693 §2.1: the party that acts for the subject (delegation), or null (impersonation). */
  actor: { token: string; tokenType: SubjectTokenType } | null;
}

/** RFC 8693 §2.1–§2.2.2: what the request must carry, checked before anything is looked up. */
export function exchangeParameters(ctx: KoaContextWithOIDC): ExchangeParameters {
  const params = oidcParams(ctx);
  const subjectToken = single(params, 'subject_token');
  const subjectTokenType = single(params, 'subject_token_type');
  if (!subjectToken) throw new errors.InvalidRequest("missing required parameter 'subject_token'");
  if (!subjectTokenType) throw new errors.InvalidRequest("missing required parameter 'subject_token_type'");
  if (subjectTokenType !== ACCESS_TOKEN_TYPE && subjectTokenType !== ID_TOKEN_TYPE) {
    const why = REFUSED_TOKEN_TYPES.has(subjectTokenType)
      ? 'is not supported as a subject token'
      : 'is not a known token type';
    throw new errors.InvalidRequest(
      `subject_token_type ${subjectTokenType.slice(0, 100)} ${why} (supported: ${ACCESS_TOKEN_TYPE}, ${ID_TOKEN_TYPE})`,
    );
  }
  return {
    subjectToken,
    subjectTokenType,
    requestedTokenType: requestedTokenType(single(params, 'requested_token_type')),
    audience: single(params, 'audience') || null,
    scopes: (single(params, 'scope') ?? '').split(' ').filter(Boolean),
    actor: actorParameters(params),
  };
}

/**
 * RFC 8693 §2.1 requested_token_type: only an access token is issued (absent means one). Any
 * other type is refused rather than answered with an access token under another label: an
 * unsupported requested_token_type is invalid_request (§2.2.2).
 */
function requestedTokenType(value: string | undefined): typeof ACCESS_TOKEN_TYPE {
  if (!value || value === ACCESS_TOKEN_TYPE) return ACCESS_TOKEN_TYPE;
  // A Map: a client's value (constructor, __proto__) is never a property every object has.
  const why = NOT_ISSUED.get(value) ?? 'it is not a token type this server issues';
  throw new errors.InvalidRequest(
    `requested_token_type ${value.slice(0, 100)} is not supported: ${why} (supported: ${ACCESS_TOKEN_TYPE})`,
  );
}

/** RFC 8693 §2.1: actor_token and actor_token_type come together; the actor is a token of a kind a subject may be. */
function actorParameters(params: Record<string, unknown>): ExchangeParameters['actor'] {
  const token = single(params, 'actor_token');
  const tokenType = single(params, 'actor_token_type');
  if (token === undefined && tokenType === undefined) return null;
  if (!token) throw new errors.InvalidRequest("actor_token_type was given without 'actor_token'");
  if (!tokenType) throw new errors.InvalidRequest("actor_token was given without 'actor_token_type'");
  if (tokenType !== ACCESS_TOKEN_TYPE && tokenType !== ID_TOKEN_TYPE) {
    throw new errors.InvalidRequest(
      `actor_token_type ${tokenType.slice(0, 100)} is not supported (supported: ${ACCESS_TOKEN_TYPE}, ${ID_TOKEN_TYPE})`,
    );
  }
  return { token, tokenType };
}

function single(params: Record<string, unknown>, name: string): string | undefined {
  const value = params[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new errors.InvalidRequest(`'${name}' must be given once`);
  return value;
}
