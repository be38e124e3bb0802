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

/** The two secret-presenting methods, which oidc-provider accepts for each other (RFC 7591 §2 registers one). */
const SECRET_METHODS = new Set(['client_secret_basic', 'client_secret_post']);

/**
 * RFC 7591 §2 `token_endpoint_auth_method` is the one way a client authenticates. oidc-provider
 * takes a secret in the Authorization header and in the form as equivalent, whichever the client
 * registered, so a client_secret_basic client could use client_secret_post while the policy input
 * and the audit entry said basic. Called once oidc-provider has authenticated the client.
 */
export function assertRegisteredAuthMethod(ctx: KoaContextWithOIDC): void {
  const registered = ctx.oidc.client?.clientAuthMethod;
  if (!registered || !SECRET_METHODS.has(registered)) return;
  const presented = /^basic /i.test(ctx.get('authorization'))
    ? 'client_secret_basic'
    : secretInForm(ctx)
      ? 'client_secret_post'
      : null;
  if (presented && presented !== registered) {
    // oidc-provider has verified the secret: right, but sent the wrong way. Not a guess (no lockout count).
    credentialWasRight(ctx);
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
