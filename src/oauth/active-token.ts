import type Provider from 'oidc-provider';
import { findTokenByValue } from './internals.js';

/** An opaque token of ours is short; anything longer is not one, and not worth a lookup. */
const MAX_TOKEN_LENGTH = 512;

/**
 * The access token (or client-credentials token) of this tenant's provider with this value,
 * when it is active (not expired, not revoked); undefined otherwise. Refresh tokens and codes
 * never pass. The one lookup behind Bearer callers, token-exchange subjects and upgraded RPTs.
 */
export async function activeAccessToken(provider: Provider, value: string) {
  if (value.length > MAX_TOKEN_LENGTH) return undefined;
  const token = await findTokenByValue(provider, value, 'access_token').catch(() => undefined);
  if (!token || (token.kind !== 'AccessToken' && token.kind !== 'ClientCredentials') || !token.isValid || token.isExpired) return undefined;
  return token;
}
