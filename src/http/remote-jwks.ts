import {
  createLocalJWKSet,
  errors as joseErrors,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyOptions,
} from 'jose';
import { shownUrl, type Outbound } from './outbound.js';
import { RemoteDocuments } from './remote-documents.js';

/** Keys are re-read this often, and at most this often when a token names a key not (yet) known. */
const JWKS_TTL_MS = 5 * 60_000;
const JWKS_REFRESH_MIN_MS = 30_000;
const JWKS_CACHE_MAX = 100;
/**
 * A failed fetch is remembered this long: until then the URL's tokens are refused at once rather
 * than each waiting on (and each opening) a fetch of keys that are not there. Anyone can send an
 * upstream logout token, so without it every such request would make one more outbound request.
 */
export const JWKS_FAILURE_BACKOFF_SECONDS = 10;
const JWKS_FAILURE_BACKOFF_MS = JWKS_FAILURE_BACKOFF_SECONDS * 1000;

type KeySet = ReturnType<typeof createLocalJWKSet>;

/**
 * The JWKS at a URL could not be fetched or read: the issuer cannot be verified. Its message may be
 * answered to the caller who sent the token, so it shows the URL without its query (shownUrl): an
 * operator's URL may carry a credential there.
 */
export class JwksUnavailableError extends Error {
  constructor(
    readonly jwksUri: string,
    cause?: unknown,
  ) {
    super(`the JWKS at ${shownUrl(jwksUri)} could not be fetched`, cause === undefined ? {} : { cause });
    this.name = 'JwksUnavailableError';
  }

  /** Why, for the log: the fetch's own failure (a timeout, a refused destination), else that fetching backs off. */
  get reason(): string {
    const cause = this.cause instanceof Error ? this.cause.message : 'a fetch failed moments ago; not tried again yet';
    return `${this.message}: ${cause}`;
  }
}

/**
 * JWTs verified against a remote issuer's JWKS (software statements, ID tokens of token
 * exchange, upstream ID and logout tokens): fetched only through the outbound guard, one fetch
 * at a time per URL, cached, and fetched again once when a token names an unknown key (a key
 * rotation), at most every 30 seconds per URL. A failed fetch is cached too, for 10 seconds.
 */
export class RemoteKeySets {
  private readonly keySets = new RemoteDocuments<KeySet>({
    ttlMs: JWKS_TTL_MS,
    failureBackoffMs: JWKS_FAILURE_BACKOFF_MS,
    maxEntries: JWKS_CACHE_MAX,
  });

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
    return Date.now() - this.keySets.fetchedAt(jwksUri) > JWKS_REFRESH_MIN_MS && !this.keySets.backingOff(jwksUri);
  }

  private keySet(jwksUri: string, refresh: boolean): Promise<KeySet> {
    return this.keySets.get(
      jwksUri,
      async () => createLocalJWKSet((await this.outbound().getJson(jwksUri)) as JSONWebKeySet),
      (cause) => new JwksUnavailableError(jwksUri, cause),
      refresh,
    );
  }
}
