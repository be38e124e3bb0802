import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { resourceServerFormat, type AccessTokenFormat } from '../jwt-access-tokens.js';
import type { IssuedBinding } from './sender-binding.js';

export interface IssuedToken {
  value: string;
  tokenType: string;
  expiresIn: number;
  scope: string | undefined;
}

/**
 * An access token issued by a grant of Arbiter's own (token exchange, the UMA grant), through
 * oidc-provider's public models, never with a refresh token. A token standing for a user is an
 * AccessToken with a grant of its own (UserInfo and revocation find the user through it); a
 * client's own token stays a client-credentials token. What the decision keeps with the token
 * (obligations, extensions, authorization details, an RPT's permissions) is added by the
 * `extraTokenClaims` hook as for every other grant (token/shaping.ts).
 */
export interface TokenGrant {
  gty: string;
  sub: string | null;
  scopes: string[];
  resource: string | null;
  /** The DPoP key (RFC 9449 §6) and client certificate (RFC 8705 §3) to bind the token to (issuedBinding). */
  binding: IssuedBinding;
  /** What the resource's record asks for (accessTokenFormatOf); opaque when absent. */
  format?: AccessTokenFormat;
  /** The latest end (epoch seconds) the token may have: an exchanged token never outlives its subject token. */
  notAfter?: number | null;
}

export async function issueAccessToken(
  provider: Provider,
  ctx: KoaContextWithOIDC,
  grant: TokenGrant,
): Promise<IssuedToken> {
  const { gty, sub, scopes, resource, binding, format = 'opaque', notAfter = null } = grant;
  const client = ctx.oidc.client!;
  const scope = scopes.join(' ') || undefined;
  const resourceServer = resource
    ? new provider.ResourceServer(resource, { scope: scope ?? '', audience: resource, ...resourceServerFormat(format) })
    : undefined;
  if (sub) {
    const userGrant = new provider.Grant({ accountId: sub, clientId: client.clientId });
    if (scope) userGrant.addOIDCScope(scope);
    if (resource && scope) userGrant.addResourceScope(resource, scope);
    const grantId = await userGrant.save();
    const token = endingBy(
      notAfter,
      (expiresIn) =>
        new provider.AccessToken({
          accountId: sub,
          client,
          grantId,
          gty,
          scope,
          ...(resourceServer ? { resourceServer } : {}),
          ...expiresIn,
        }),
    );
    bind(token, binding);
    ctx.oidc.entity('AccessToken', token);
    const value = await token.save();
    return { value, tokenType: token.tokenType, expiresIn: token.expiration, scope: token.scope };
  }
  const token = endingBy(
    notAfter,
    (expiresIn) =>
      new provider.ClientCredentials({ client, scope, ...(resourceServer ? { resourceServer } : {}), ...expiresIn }),
  );
  bind(token, binding);
  ctx.oidc.entity('ClientCredentials', token);
  const value = await token.save();
  return { value, tokenType: token.tokenType, expiresIn: token.expiration, scope: token.scope };
}

function bind(
  token: InstanceType<Provider['AccessToken']> | InstanceType<Provider['ClientCredentials']>,
  binding: IssuedBinding,
): void {
  if (binding.certificate) token.setThumbprint('x5t', binding.certificate);
  if (binding.jkt) token.setThumbprint('jkt', binding.jkt);
}

/**
 * The token `make` builds, with its usual lifetime (the TTL configured), or one that ends by
 * `notAfter` (epoch seconds) when that comes first: never less than a second. `expiresIn` is the
 * token constructor's own option.
 */
function endingBy<T extends { expiration: number }>(
  notAfter: number | null,
  make: (expiresIn: { expiresIn?: number }) => T,
): T {
  const usual = make({});
  if (notAfter === null) return usual;
  const left = Math.max(1, notAfter - Math.floor(Date.now() / 1000));
  return left < usual.expiration ? make({ expiresIn: left }) : usual;
}
