import {
  createLocalJWKSet,
  errors as joseErrors,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyOptions,
} from 'jose';
import { shownUrl, type Outbound } from './outbound.js';

/** Keys are re-read this often, and at most this often when a token names a key not (yet) known. */
const JWKS_TTL_MS = 5 * 60_000;
const JWKS_REFRESH_MIN_MS = 30_000;
const JWKS_CACHE_MAX = 100;

type KeySet = ReturnType<typeof createLocalJWKSet>;

/**
 * The JWKS at a URL could not be fetched or read: the issuer cannot be verified. Its message may be
 * answered to the caller who sent the token, so it shows the URL without its query (shownUrl): an
 * operator's URL may carry a credential there.
 */
export class JwksUnavailableError extends Error {
  constructor(readonly jwksUri: string) {
    super(`the JWKS at ${shownUrl(jwksUri)} could not be fetched`);
    this.name = 'JwksUnavailableError';
  }
}

/**
 * JWTs verified against a remote issuer's JWKS (software statements, ID tokens of token
 * exchange): fetched only through the outbound guard, cached, and fetched again once when a
 * token names an unknown key (a key rotation), at most every 30 seconds per URL.
 */
export class RemoteKeySets {
  private readonly cache = new Map<string, { fetchedAt: number; keys: KeySet }>();

  constructor(private readonly outbound: () => Outbound) {}

  /** The verified payload; JwksUnavailableError when the keys cannot be had, else jose's error. */
  async verify(jwt: string, jwksUri: string, options: JWTVerifyOptions): Promise<JWTPayload> {
    try {
      return (await jwtVerify(jwt, await this.keySet(jwksUri, false), options)).payload;
    } catch (error) {
      if (!(error instanceof joseErrors.JWKSNoMatchingKey) || !this.mayRefresh(jwksUri)) throw error;
    }
    return (await jwtVerify(jwt, await this.keySet(jwksUri, true), options)).payload;
  }

  private mayRefresh(jwksUri: string): boolean {
    const cached = this.cache.get(jwksUri);
    return !cached || Date.now() - cached.fetchedAt > JWKS_REFRESH_MIN_MS;
  }

  private async keySet(jwksUri: string, refresh: boolean): Promise<KeySet> {
    const cached = this.cache.get(jwksUri);
    if (cached && !refresh && Date.now() - cached.fetchedAt < JWKS_TTL_MS) return cached.keys;
    let keys: KeySet;
    try {
      keys = createLocalJWKSet((await this.outbound().getJson(jwksUri)) as JSONWebKeySet);
    } catch {
      throw new JwksUnavailableError(jwksUri);
    }
    if (this.cache.size >= JWKS_CACHE_MAX) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.delete(jwksUri);
    this.cache.set(jwksUri, { fetchedAt: Date.now(), keys });
    return keys;
  }
}
