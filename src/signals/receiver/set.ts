import { decodeJwt, decodeProtectedHeader, errors as joseErrors, type JWTPayload } from 'jose';
import { MAX_JSON_DEPTH, nestingExceeds, refuseNul } from '../../http/body.js';
import { HttpError } from '../../http/errors.js';
import { JwksUnavailableError } from '../../http/remote-jwks.js';
import { TransmitterUnavailableError, type TransmitterKeys, type TransmittingProvider } from './transmitters.js';

/** RFC 8417 §2.3: the `typ` of a Security Event Token (SSF 1.0 §4.1.8 requires it). */
export const SET_TYPE = 'secevent+jwt';
/** A SET's `iat` may be this far ahead of this node's clock (the transmitter's clock runs a little fast). */
const CLOCK_TOLERANCE_SECONDS = 60;
/** A compact JWS: three base64url parts (an encrypted SET, five parts, is not taken). */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
/** SSF 1.0 sends one event per SET; a few more are taken, no more, so that one push costs a bounded number of revocations. */
const MAX_EVENTS = 8;

/** RFC 8935 §2.4's error codes. */
export type PushErrorCode =
  'invalid_request' | 'invalid_key' | 'invalid_issuer' | 'invalid_audience' | 'authentication_failed' | 'access_denied';

/** A push refused: answered `{"err": code, "description": …}` (RFC 8935 §2.3) with `status`. */
export class PushRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: PushErrorCode,
    description: string,
  ) {
    super(description);
    this.name = 'PushRefusal';
  }
}

const invalid = (description: string) => new PushRefusal(400, 'invalid_request', description);

/** A verified SET: its `jti`, and each of its events by type URI with the subject it names. */
export interface SecurityEvent {
  type: string;
  /** The event's `subject` (an older CAEP form) or the SET's `sub_id` (SSF 1.0 §4.1). */
  subject: unknown;
}

export interface VerifiedSet {
  jti: string;
  events: SecurityEvent[];
  /**
   * Until when (epoch ms) the SET could be accepted: its `iat` plus the maximum age, and the clock
   * tolerance on either side. Its `jti` is remembered as long, so it is never acted on twice.
   */
  acceptedUntil: number;
}

/**
 * The SET a transmitter pushed, checked as RFC 8417 and SSF 1.0 ask of a receiver: a compact JWS
 * of `typ: secevent+jwt`, its `iss` the provider's transmitter (invalid_issuer), its `aud`
 * naming `audience` (invalid_audience), signed with one of the transmitter's keys (invalid_key),
 * `iat` no older than `maxAgeSeconds` and not in the future, a `jti`, and at least one event.
 * Claims are compared before the keys are fetched, so that a wrong SET costs no fetch.
 */
export async function verifiedSet(
  token: string,
  idp: TransmittingProvider,
  audience: string,
  keys: TransmitterKeys,
  maxAgeSeconds: number,
): Promise<VerifiedSet> {
  if (!COMPACT_JWS.test(token)) throw invalid('the body is not a signed JWT (a compact JWS)');
  let claims: JWTPayload;
  try {
    if (decodeProtectedHeader(token).typ !== SET_TYPE) throw invalid(`the SET's typ must be ${SET_TYPE}`);
    claims = decodeJwt(token);
  } catch (error) {
    if (error instanceof PushRefusal) throw error;
    throw invalid('the body is not a JWT');
  }
  // Found 2026-11-29: 22,000 nested arrays overflowed the stack of the walk below, and the
  // engine's own message reached the caller. As shallow as a JSON body must be.
  if (nestingExceeds(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'), MAX_JSON_DEPTH))
    throw invalid(`the SET's claims nest deeper than ${MAX_JSON_DEPTH} levels`);
  try {
    refuseNul(claims, 'the SET');
  } catch (error) {
    throw invalid(error instanceof HttpError ? error.message : 'the SET could not be read');
  }
  if (claims.iss !== idp.ssfIssuer)
    throw new PushRefusal(400, 'invalid_issuer', "the SET's iss is not the transmitter's");
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(audience))
    throw new PushRefusal(400, 'invalid_audience', `the SET's aud does not name ${audience}`);
  const payload = await signed(token, idp, audience, keys, maxAgeSeconds);
  if (typeof payload.jti !== 'string' || payload.jti === '') throw invalid('the SET has no jti');
  const acceptedUntil = ((payload.iat ?? 0) + maxAgeSeconds + 2 * CLOCK_TOLERANCE_SECONDS) * 1000;
  return { jti: payload.jti, events: eventsOf(payload), acceptedUntil };
}

async function signed(
  token: string,
  idp: TransmittingProvider,
  audience: string,
  keys: TransmitterKeys,
  maxAgeSeconds: number,
): Promise<JWTPayload> {
  try {
    return await keys.verify(token, idp, {
      issuer: idp.ssfIssuer,
      audience,
      typ: SET_TYPE,
      requiredClaims: ['iat', 'jti'],
      maxTokenAge: maxAgeSeconds,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
    });
  } catch (error) {
    if (error instanceof JwksUnavailableError || error instanceof TransmitterUnavailableError) throw error;
    if (
      error instanceof joseErrors.JWSSignatureVerificationFailed ||
      error instanceof joseErrors.JWKSNoMatchingKey ||
      error instanceof joseErrors.JWKSMultipleMatchingKeys ||
      error instanceof joseErrors.JOSEAlgNotAllowed ||
      error instanceof joseErrors.JOSENotSupported
    )
      throw new PushRefusal(400, 'invalid_key', "the SET is not signed with one of the transmitter's keys");
    if (error instanceof joseErrors.JWTExpired || error instanceof joseErrors.JWTClaimValidationFailed)
      throw invalid(`the SET's claims are not acceptable: ${error.message}`);
    if (error instanceof joseErrors.JOSEError) throw invalid('the SET cannot be read');
    throw error;
  }
}

/** RFC 8417 §2.2: `events` is an object of event type URI → event payload, at least one. */
function eventsOf(payload: JWTPayload): SecurityEvent[] {
  const events = payload.events;
  if (!isObject(events) || Object.keys(events).length === 0) throw invalid('the SET has no events');
  if (Object.keys(events).length > MAX_EVENTS) throw invalid(`the SET has more than ${MAX_EVENTS} events`);
  return Object.entries(events).map(([type, event]) => {
    if (!isObject(event)) throw invalid(`the event ${type} is not an object`);
    return { type, subject: event.subject ?? payload.sub_id };
  });
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
