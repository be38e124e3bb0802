import type { Context } from 'koa';
import type Provider from 'oidc-provider';
import { markAuthenticated } from '../../audit/facts.js';
import { bearerToken, invalidToken } from '../../http/bearer.js';
import { HttpError } from '../../http/errors.js';
import { activeAccessToken } from '../active-token.js';

/** Who calls a protected API of this server with one of its access tokens (RFC 6750). */
export interface TokenCaller {
  /** The client the token was issued to. */
  clientId: string;
  /** The user the token stands for; null for a client's own token (client_credentials). */
  sub: string | null;
  scopes: string[];
}

export interface TokenRequirement {
  /** The scope the API needs (403 insufficient_scope without it). */
  scope: string;
  /** The resource indicator the token must have been issued for, when the API asks for one. */
  audience?: string;
}

/** Authenticates the Bearer caller of a protected API of this tenant (UMA protection, delegation, AuthZEN). */
export type TokenCallers = (ctx: Context, requirement: TokenRequirement) => Promise<TokenCaller>;

/**
 * The one way Arbiter's own APIs accept its access tokens: a valid access token of the
 * request's tenant (each tenant's provider knows only its own tokens), presented as Bearer,
 * not DPoP-bound (RFC 9449 §7.1: such a token is presented with its proof, never as Bearer),
 * carrying the API's scope. No token, or not an active one: 401 invalid_token with the RFC 6750
 * challenge; an active token without the scope or for another audience: 403 insufficient_scope.
 */
export function tokenCallers(providerFor: (tenant: string) => Provider): TokenCallers {
  return async (ctx, requirement) => {
    const value = bearerToken(ctx.get('authorization'));
    if (!value) throw invalidToken(ctx, 'a Bearer access token is required');
    const provider = providerFor(ctx.state.tenant as string);
    const token = await activeAccessToken(provider, value);
    if (!token) throw invalidToken(ctx, 'the access token is not active');
    if (token.jkt) throw invalidToken(ctx, 'a DPoP-bound access token must be presented with its DPoP proof, not as a Bearer token');
    markAuthenticated(ctx.state);
    const scopes = typeof token.scope === 'string' ? token.scope.split(' ').filter(Boolean) : [];
    const audiences = [token.aud].flat().filter((aud): aud is string => typeof aud === 'string');
    if (!scopes.includes(requirement.scope) || (requirement.audience && !audiences.includes(requirement.audience))) {
      throw insufficientScope(ctx, requirement);
    }
    return { clientId: token.clientId as string, sub: typeof token.accountId === 'string' ? token.accountId : null, scopes };
  };
}

function insufficientScope(ctx: Context, { scope, audience }: TokenRequirement): HttpError {
  ctx.set('WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`);
  const target = audience ? ` issued for resource ${audience}` : '';
  return new HttpError(403, 'insufficient_scope', `this API requires an access token with scope ${scope}${target}`);
}
