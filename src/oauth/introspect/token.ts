import type Provider from 'oidc-provider';
import { findTokenByValue } from '../internals.js';
import type { TokenModel } from '../state.js';

/**
 * The token a caller asks about, through oidc-provider's token models: an opaque access,
 * client-credentials or refresh token by its value; a JWT access token (RFC 9068) this tenant
 * signed by its verified `jti`, the key of the record kept for it (oidc-provider 9 keeps none of
 * its own for a JWT: without a record under the jti, revocation could not reach it, so it is
 * inactive). Undefined unless the token is valid (not expired, not consumed) and its grant, when
 * it has one, is still in force for the same client and subject (a grant revoked with its
 * refresh token ends its access tokens too).
 */
export async function findIntrospectedToken(
  provider: Provider,
  value: string,
  hint: string | undefined,
): Promise<TokenModel | undefined> {
  // A JWT access token is found by its value too: its verified jti's record (findJwtAccessTokensToo).
  const token = (await findTokenByValue(provider, value, hint)) as TokenModel | undefined;
  if (!token?.isValid) return undefined;
  if (token.grantId && !(await grantInForce(provider, token))) return undefined;
  return token;
}

async function grantInForce(provider: Provider, token: TokenModel): Promise<boolean> {
  const grant = await provider.Grant.find(token.grantId as string, { ignoreExpiration: true });
  return (
    grant !== undefined && !grant.isExpired && grant.clientId === token.clientId && grant.accountId === token.accountId
  );
}
