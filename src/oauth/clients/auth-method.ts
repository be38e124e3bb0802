import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { credentialWasRight } from '../../http/auth-failures.js';
import { oidcParams } from '../shared/oidc-params.js';

/**
 * The client authentication methods of the spec, at every endpoint where oidc-provider authenticates
 * clients (/token, /revoke, /introspect); client_secret_jwt is not offered: secrets are stored hashed.
 * Discovery advertises each endpoint's share of them (routes.ts).
 */
export const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'] as const;

/** The longest a client assertion (RFC 7523, private_key_jwt) may be valid ahead: its `exp` at most this far from now. */
export const MAX_CLIENT_ASSERTION_LIFETIME_SECONDS = 3600;

/** The clock skew allowed to a client assertion's `iat` (oidc-provider's own clockTolerance is 15 s). */
const ASSERTION_CLOCK_TOLERANCE_SECONDS = 15;

/**
 * RFC 7523 §3 (4, 6): the server may refuse an assertion whose `exp` is unreasonably far ahead, or
 * whose `iat` is in the future. Without a bound, a leaked assertion could be redeemed once at any
 * time, and each one kept its replay record for as long (found 2026-11-29: `exp` 1,000 years ahead
 * was accepted). oidc-provider's own check (FAPI 2.0: `aud` is the issuer) is kept.
 */
export async function assertClientAssertionClaims(
  ctx: KoaContextWithOIDC,
  claims: Record<string, unknown>,
): Promise<void> {
  if (ctx.oidc.isFapi('2.0') && claims.aud !== ctx.oidc.issuer)
    throw new errors.InvalidClientAuth('audience (aud) must equal the issuer identifier url');
  const now = Math.floor(Date.now() / 1000);
  if (typeof claims.exp === 'number' && claims.exp > now + MAX_CLIENT_ASSERTION_LIFETIME_SECONDS)
    throw new errors.InvalidClientAuth(
      `the client assertion's exp is more than ${MAX_CLIENT_ASSERTION_LIFETIME_SECONDS} seconds ahead`,
    );
  if (typeof claims.iat === 'number' && claims.iat > now + ASSERTION_CLOCK_TOLERANCE_SECONDS)
    throw new errors.InvalidClientAuth("the client assertion's iat is in the future");
}

/** The two secret-presenting methods, which oidc-provider accepts for each other (RFC 7591 §2 registers one). */
const SECRET_METHODS = new Set(['client_secret_basic', 'client_secret_post']);

/**
 * RFC 7591 §2 `token_endpoint_auth_method` is the one way a client authenticates. oidc-provider
 * takes a secret in the Authorization header and in the form as equivalent, whichever the client
 * registered, so a client_secret_basic client could use client_secret_post while the policy input
 * and the audit entry said basic. Called once oidc-provider has authenticated the client, which
 * tells the failure limiter that its credential was right (whatever the method: an assertion or a
 * certificate too), so that the next request of the client may be verified.
 */
export function assertRegisteredAuthMethod(ctx: KoaContextWithOIDC): void {
  if (ctx.oidc.client) credentialWasRight(ctx);
  const registered = ctx.oidc.client?.clientAuthMethod;
  if (!registered || !SECRET_METHODS.has(registered)) return;
  const presented = /^basic /i.test(ctx.get('authorization'))
    ? 'client_secret_basic'
    : secretInForm(ctx)
      ? 'client_secret_post'
      : null;
  if (presented && presented !== registered) {
    // oidc-provider has verified the secret: right, but sent the wrong way. Not a guess (no lockout count, above).
    const refusal = new errors.InvalidClientAuth(`the client authenticated with ${presented}`);
    // oidc-provider's own description is a generic one; the client is told how it must authenticate.
    refusal.error_description = `the client is registered for ${registered} and must authenticate with it, not with ${presented}`;
    throw refusal;
  }
}

/** A client_secret in the form: /par's parameters (ctx.oidc.params) are the authorization request's alone, so the body too. */
function secretInForm(ctx: KoaContextWithOIDC): boolean {
  return oidcParams(ctx).client_secret !== undefined || ctx.oidc.body?.client_secret !== undefined;
}
