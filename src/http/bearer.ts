import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { HttpError } from './errors.js';

/** RFC 6750 §2.1: `Authorization: Bearer <b64token>`. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** RFC 9449 §7.1: `Authorization: DPoP <b64token>`, a DPoP-bound access token (its proof in the DPoP header). */
const DPOP = /^DPoP +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** The access token of a Bearer or DPoP Authorization header, with its scheme; undefined otherwise. */
export function presentedAccessToken(authorization: string): { scheme: 'Bearer' | 'DPoP'; value: string } | undefined {
  const bearer = bearerToken(authorization);
  if (bearer) return { scheme: 'Bearer', value: bearer };
  const bound = DPOP.exec(authorization)?.[1];
  return bound ? { scheme: 'DPoP', value: bound } : undefined;
}

/**
 * A refused DPoP-bound token or proof (RFC 9449 §7.1): 401 with the DPoP challenge; `use_dpop_nonce`
 * leaves the DPoP-Nonce header the check set.
 */
export function invalidDpop(ctx: Context, error: string, description: string): HttpError {
  ctx.set('WWW-Authenticate', `DPoP error="${error}"`);
  return new HttpError(401, error, description);
}

/** The token of a Bearer Authorization header, or undefined when the header is absent or not of that form. */
export function bearerToken(authorization: string): string | undefined {
  return BEARER.exec(authorization)?.[1];
}

/** A refused Bearer token: 401 invalid_token with the challenge RFC 6750 §3 asks for. */
export function invalidToken(ctx: Context, description: string): HttpError {
  ctx.set('WWW-Authenticate', 'Bearer error="invalid_token"');
  return new HttpError(401, 'invalid_token', description);
}

/** An active token without the scope an API needs: 403 insufficient_scope with the challenge RFC 6750 §3.1 asks for. */
export function insufficientScope(ctx: Context, scope: string, description: string): HttpError {
  ctx.set('WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`);
  return new HttpError(403, 'insufficient_scope', description);
}

/**
 * True when `authorization` is `Bearer <expected>` (a configured token: the policy bundle's,
 * METRICS_TOKEN). Digests are compared, so that neither the token nor its length leaks through timing.
 */
export function bearerMatches(authorization: string, expected: string): boolean {
  const presented = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
  if (presented === undefined) return false;
  const sha = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(sha(presented), sha(expected));
}
