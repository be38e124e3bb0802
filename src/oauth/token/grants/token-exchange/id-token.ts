import { decodeJwt, decodeProtectedHeader, errors as joseErrors, type JWTPayload } from 'jose';
import { errors } from 'oidc-provider';
import type { Outbound } from '../../../../http/outbound.js';
import { JwksUnavailableError, RemoteKeySets } from '../../../../http/remote-jwks.js';
import type { PolicyEngine } from '../../../../policy/index.js';
import { ID_TOKEN_TYPE } from './parameters.js';
import { ISSUER_SIGNING_ALGORITHMS, trustedIssuersFor, type TrustedIssuer } from '../../../shared/trusted-issuers.js';
import { UNBOUND, type ResolvedSubject } from './subject.js';

/** The spec's id-token exchange error descriptions (all invalid_grant). */
export const ID_TOKEN_ERRORS = {
  malformed: 'the subject token is not a signed JWT',
  missingIss: 'the subject token is missing the iss claim',
  missingSub: 'the subject token is missing the sub claim',
  expired: 'the subject token has expired (exp is in the past)',
  signature: 'the subject token signature verification failed',
  unverifiable: "unable to verify the subject token's issuer: its JWKS is unreachable",
  notIdToken: 'the subject token is not an ID token (its typ, or an events claim, says it is another JWT)',
  otherAudience:
    'the subject token was not issued to this client: its aud (and azp) must name the client, or an audience trusted_issuers lists for its issuer',
  otherProvider:
    "the subject token's sub is a user here who signs in through another identity provider: its issuer does not speak for them",
} as const;

const invalidGrant = (description: string) => new errors.CustomOIDCProviderError('invalid_grant', description);

const MAX_TOKEN_LENGTH = 16_384;
/** The subject claims relayed to the policy (flat profile claims; nothing nested). */
const PROFILE_CLAIMS = [
  'name',
  'given_name',
  'family_name',
  'email',
  'email_verified',
  'preferred_username',
  'locale',
  'azp',
  'auth_time',
  'acr',
  'amr',
];

/**
 * ID tokens of external issuers as subject tokens (spec: "a JWT from an external issuer whose
 * iss must be in the trusted issuers of the policy data"). The issuer's `jwks_uri` comes from
 * `data.oauth.trusted_issuers`; the JWKS is fetched through the outbound guard and cached. An
 * issuer that is not trusted is not verified at all: the policy refuses it (untrusted_token_issuer).
 */
export class IdTokenSubjects {
  private readonly keySets: RemoteKeySets;

  constructor(
    private readonly policy: PolicyEngine,
    outbound: () => Outbound,
  ) {
    this.keySets = new RemoteKeySets(outbound);
  }

  /**
   * `clientId`: the client asking, which the ID token must have been issued to. `speaksFor`: whether
   * an issuer may speak for the tenant's user of a `sub` (subject-issuer.ts).
   */
  async resolve(
    value: string,
    clientId: string,
    speaksFor: (issuer: string, sub: string) => Promise<boolean>,
  ): Promise<ResolvedSubject> {
    const claims = decoded(value);
    const iss = nonEmptyString(claims.iss);
    if (!iss) throw invalidGrant(ID_TOKEN_ERRORS.missingIss);
    const sub = nonEmptyString(claims.sub);
    if (!sub) throw invalidGrant(ID_TOKEN_ERRORS.missingSub);
    const issuer = await this.trustedIssuer(iss);
    // Not trusted: nothing is verified, and the policy is told so (it refuses the issuer).
    if (!issuer) return subjectOf(claims, iss, sub, false);
    if (typeof claims.exp === 'number' && claims.exp * 1000 <= Date.now()) throw invalidGrant(ID_TOKEN_ERRORS.expired);
    if (typeof issuer.jwks_uri !== 'string') throw invalidGrant(ID_TOKEN_ERRORS.unverifiable);
    const verified = await this.verify(value, iss, issuer.jwks_uri);
    assertIdTokenOf(value, verified, [clientId, ...listedAudiences(issuer, clientId)]);
    // The token would stand for the local user of that sub: only their own provider may say who
    // they are, as at sign-in (rememberSubject). Found 2026-11-29: any trusted issuer could
    // name a local user's sub, and the token was theirs (UserInfo, delegations, UMA ownership).
    // The issued token keeps the issuer (SUBJECT_ISSUER) for a user who signs in later.
    if (!(await speaksFor(iss, sub))) throw invalidGrant(ID_TOKEN_ERRORS.otherProvider);
    return { ...subjectOf(verified, iss, sub, true), subjectIssuer: iss };
  }

  private async trustedIssuer(iss: string): Promise<TrustedIssuer | undefined> {
    return (await trustedIssuersFor(this.policy, 'token_exchange')).get(iss);
  }

  private async verify(value: string, iss: string, jwksUri: string): Promise<JWTPayload> {
    try {
      return await this.keySets.verify(value, jwksUri, {
        issuer: iss,
        algorithms: ISSUER_SIGNING_ALGORITHMS,
        requiredClaims: ['exp'],
      });
    } catch (error) {
      throw verificationError(error);
    }
  }
}

/**
 * OIDC Core §2: an ID token is issued to the relying party its `aud` names (and `azp`, when
 * present); any party the issuer gave a token to could otherwise trade it here for one of its
 * own. Other JWTs of a trusted issuer (an access token, `typ: at+jwt`; a logout token or SET,
 * with `events`) are no ID tokens. `audiences`: the client asking, and those the operator lists
 * for the issuer (`trusted_issuers[iss].audiences`: its client ids at that issuer).
 */
function assertIdTokenOf(value: string, claims: JWTPayload, audiences: string[]): void {
  const typ = decodeProtectedHeader(value).typ;
  if ((typ !== undefined && typ.toLowerCase() !== 'jwt') || claims.events !== undefined)
    throw invalidGrant(ID_TOKEN_ERRORS.notIdToken);
  const aud = Array.isArray(claims.aud) ? claims.aud : claims.aud === undefined ? [] : [claims.aud];
  const azp = claims.azp;
  if (!aud.some((each) => audiences.includes(each)) || (azp !== undefined && !audiences.includes(String(azp))))
    throw invalidGrant(ID_TOKEN_ERRORS.otherAudience);
}

/**
 * The audiences besides its own id that an ID token exchanged by `clientId` may name,
 * `trusted_issuers[iss].audiences`: an object maps each id this server's clients have at the
 * issuer to the clients here that may exchange its ID tokens; an array (the earlier form) lists
 * ids any client of the tenant may. Found 2026-11-30: only the array existed, so every
 * confidential client of a tenant could exchange an ID token issued to another client's id there.
 */
function listedAudiences(issuer: TrustedIssuer, clientId: string): string[] {
  const listed = issuer.audiences;
  if (Array.isArray(listed)) return listed.filter((each): each is string => typeof each === 'string');
  if (!listed || typeof listed !== 'object') return [];
  return Object.entries(listed)
    .filter(([, clients]) => Array.isArray(clients) && clients.includes(clientId))
    .map(([audience]) => audience);
}

function decoded(value: string): JWTPayload {
  try {
    if (value.length > MAX_TOKEN_LENGTH) throw new Error('too long');
    decodeProtectedHeader(value);
    return decodeJwt(value);
  } catch {
    throw invalidGrant(ID_TOKEN_ERRORS.malformed);
  }
}

function verificationError(error: unknown): Error {
  if (error instanceof errors.OIDCProviderError) return error;
  if (error instanceof JwksUnavailableError) return invalidGrant(ID_TOKEN_ERRORS.unverifiable);
  if (error instanceof joseErrors.JWTExpired) return invalidGrant(ID_TOKEN_ERRORS.expired);
  if (error instanceof joseErrors.JWTClaimValidationFailed)
    return invalidGrant(`the subject token's ${error.claim} claim is invalid or missing`);
  return invalidGrant(ID_TOKEN_ERRORS.signature);
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' && value.length <= 1024 ? value : undefined;
}

function subjectOf(claims: JWTPayload, iss: string, sub: string, active: boolean): ResolvedSubject {
  const profile = Object.fromEntries(
    PROFILE_CLAIMS.filter((name) => isFlat(claims[name])).map((name) => [name, claims[name]]),
  );
  return {
    token: {
      token_type: ID_TOKEN_TYPE,
      active,
      iss,
      sub,
      client_id: null,
      scopes: [],
      resource: null,
      exp: typeof claims.exp === 'number' && Number.isInteger(claims.exp) ? claims.exp : null,
      act: claimObject(claims.act),
      may_act: claimObject(claims.may_act),
    },
    subject: { sub, idp: iss, claims: active ? profile : {} },
    binding: UNBOUND,
  };
}

function isFlat(value: unknown): boolean {
  return (
    ['string', 'number', 'boolean'].includes(typeof value) ||
    (Array.isArray(value) && value.every((item) => typeof item === 'string'))
  );
}

/** An object-valued claim (RFC 8693 `act`, `may_act`), or null. */
function claimObject(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}
