import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { recognizeScopes } from '../../internals.js';
import { TOKEN_EXCHANGE } from './parameters.js';
import type { ResolvedSubject } from './subject.js';

export interface IssuedToken {
  value: string;
  tokenType: string;
  expiresIn: number;
  scope: string | undefined;
}

/**
 * The exchanged access token, through oidc-provider's public models, never with a refresh
 * token. A token standing for a user is an AccessToken with a grant of its own (UserInfo and
 * revocation find the user through it); a client's own token stays a client-credentials token.
 * What the decision keeps with the token (obligations, extensions, authorization details) is
 * added by the `extraTokenClaims` hook as for every other grant (token-shaping.ts).
 */
export async function issueExchangedToken(provider: Provider, ctx: KoaContextWithOIDC, resolved: ResolvedSubject, scopes: string[], resource: string | null): Promise<IssuedToken> {
  const client = ctx.oidc.client!;
  const scope = scopes.join(' ') || undefined;
  recognizeScopes(provider, scopes);
  const resourceServer = resource ? new provider.ResourceServer(resource, { scope: scope ?? '', audience: resource, accessTokenFormat: 'opaque' }) : undefined;
  const sub = resolved.subject?.sub;
  if (sub) {
    const grant = new provider.Grant({ accountId: sub, clientId: client.clientId });
    if (scope) grant.addOIDCScope(scope);
    if (resource && scope) grant.addResourceScope(resource, scope);
    const grantId = await grant.save();
    const token = new provider.AccessToken({ accountId: sub, client, grantId, gty: TOKEN_EXCHANGE, scope, ...(resourceServer ? { resourceServer } : {}) });
    ctx.oidc.entity('AccessToken', token);
    const value = await token.save();
    return { value, tokenType: token.tokenType, expiresIn: token.expiration, scope: token.scope };
  }
  const token = new provider.ClientCredentials({ client, scope, ...(resourceServer ? { resourceServer } : {}) });
  ctx.oidc.entity('ClientCredentials', token);
  const value = await token.save();
  return { value, tokenType: token.tokenType, expiresIn: token.expiration, scope: token.scope };
}
