/**
 * Every use of oidc-provider's internals, and nothing else. Arbiter extends oidc-provider through
 * its public configuration and `registerGrantType`; what follows has no public equivalent in
 * oidc-provider 9. Each use is checked by test/oauth/internals.test.ts, which fails loudly when
 * an upgrade moves or changes one of them (docs/oidc-provider-internals.md lists them and why).
 */
import { createHash } from 'node:crypto';
import type Provider from 'oidc-provider';
import { errors, type AdapterPayload, type KoaContextWithOIDC } from 'oidc-provider';
import compose from 'koa-compose';
import als from 'oidc-provider/lib/helpers/als.js';
import assembleParams from 'oidc-provider/lib/shared/assemble_params.js';
import clientAuth, { getClientAuthParams } from 'oidc-provider/lib/shared/client_auth.js';
import * as builtInGrants from 'oidc-provider/lib/actions/grants/index.js';
import * as grantHelpers from 'oidc-provider/lib/helpers/grants.js';
import { findToken } from 'oidc-provider/lib/helpers/token_find.js';
import validateDpop, { checkDpopReplay } from 'oidc-provider/lib/helpers/validate_dpop.js';
import instance from 'oidc-provider/lib/helpers/weak_cache.js';
import KeyStore from 'oidc-provider/lib/helpers/keystore.js';

/**
 * 1. Scopes outside policy data become known to oidc-provider where a request needs them: those
 * a client registered, as it asks for them at /authorize or /par, and those a decision grants at
 * the token endpoint. oidc-provider silently drops any scope outside its configured list from an
 * authorization or client_credentials request without a resource indicator, filtering with
 * `Set.prototype.has` bound to that list, so no construction-time value can stand for "whatever
 * the policy grants". The spec's scopes and those policy data names are the list it is built
 * with (configuration.ts, once per policy revision); a provider built for the next revision
 * starts from that list again. Discovery advertises the spec's scopes (discovery.ts).
 */
export function recognizeScopes(provider: Provider, scopes: Iterable<string>): void {
  const known = knownScopes(provider);
  for (const scope of scopes) known.add(scope);
}

/** The scopes oidc-provider currently recognizes (configured, plus those recognized since). */
export function knownScopes(provider: Provider): Set<string> {
  return instance(provider).configuration.scopes;
}

/**
 * 2. Every client may ask for every RAR type the provider accepts (those policy data defines,
 * fixed at construction: rar.ts), the policy deciding per client. oidc-provider's client model
 * holds an `authorization_details_types` list per client (RFC 9396 §10) that it requires, checks
 * against the accepted types (each against all: quadratic) whenever it builds a client, and
 * hashes with the rest of the metadata on every lookup; with 10,000 types in policy data that is
 * work on every request. So this provider's clients list none (the library's default) and its
 * Client model reads every client's list as "not restricted", which oidc-provider's RAR check
 * (lib/shared/check_rar.js) treats as every accepted type.
 */
export function everyClientMayAskForEveryType(provider: Provider): void {
  Object.defineProperty(provider.Client.prototype, 'authorizationDetailsTypes', {
    configurable: true,
    get: () => undefined,
    // The constructor assigns the schema's default (an empty list): not kept.
    set: () => undefined,
  });
}

/** 3. An access token, client-credentials token or refresh token by its value (the token introspected, and Bearer callers' own). */
export const findTokenByValue = findToken as (
  provider: Provider,
  value: string,
  hint?: string,
) => ReturnType<typeof findToken>;

/**
 * 3. How a presented client secret is compared with the stored one. Arbiter stores client
 * secrets only as keyed digests or BCrypt hashes; oidc-provider compares plain strings and has no hook for it,
 * so its Client model's comparison is replaced (on this provider's own Client class).
 */
export function compareClientSecretsWith(
  provider: Provider,
  compare: (clientId: string, presented: string, stored: string) => Promise<boolean>,
): void {
  const prototype = provider.Client.prototype as unknown as {
    clientSecret?: string;
    compareClientSecret(actual: string): Promise<boolean>;
  };
  if (typeof prototype.compareClientSecret !== 'function')
    throw new Error('oidc-provider Client#compareClientSecret is gone: see src/oauth/internals.ts');
  prototype.compareClientSecret = async function compareClientSecret(
    this: { clientId: string; clientSecret?: string },
    actual: string,
  ) {
    return (
      typeof this.clientSecret === 'string' &&
      typeof actual === 'string' &&
      compare(this.clientId, actual, this.clientSecret)
    );
  };
}

/**
 * 6. OIDC Core §12.2: an ID token issued on a refresh SHOULD NOT carry a `nonce`. oidc-provider's
 * refresh handler issues it with the refresh token's nonce (the sign-in's), through
 * `IdToken#set('nonce', …)`, with no option to leave it out; on this provider's own IdToken class,
 * that one claim is not set during a refresh_token grant.
 */
export function noNonceInRefreshedIdTokens(provider: Provider): void {
  const { prototype } = (provider as unknown as { IdToken: { prototype: IdTokenInternals } }).IdToken;
  const set = prototype.set;
  prototype.set = function (this: IdTokenInternals, key: string, value: unknown) {
    if (key === 'nonce' && this.ctx?.oidc?.params?.grant_type === 'refresh_token') return;
    set.call(this, key, value);
  };
}

/**
 * 10. /token's parameters hold only those the request gave. oidc-provider assembles them with one
 * property per parameter of every registered grant and client authentication method (26 with
 * Arbiter's grants, 12 in the bare library), nearly all undefined; an object given that many
 * properties one by one is kept by V8 as a hash table, which the library then walks four times
 * (lib/shared/reject_dupes.js) and deletes the other grants' parameters from (lib/actions/token.js,
 * stripGrantIrrelevantParams): about 40 µs of a request's 700. On this provider's own OIDCContext
 * class, the Params object /token assembles is replaced by one of the same class with the given
 * parameters alone, which reads the same (an absent parameter is undefined either way) and walks
 * the same. Other routes keep every key: /authorize replaces a request object's parameters by
 * walking them (lib/actions/authorization/process_request_object.js).
 */
export function givenTokenParametersOnly(provider: Provider): void {
  Object.defineProperty(provider.OIDCContext.prototype, 'params', {
    configurable: true,
    get: () => undefined,
    // The first assignment makes `params` an own property: later ones (a grant narrowing its scope) write it directly.
    set(this: { route?: string }, params: unknown) {
      const value =
        this.route === 'token' && typeof params === 'object' && params !== null ? givenOnly(params) : params;
      Object.defineProperty(this, 'params', { value, writable: true, enumerable: true, configurable: true });
    },
  });
}

/**
 * 12. The audiences a client assertion (private_key_jwt, client_secret_jwt) may name. oidc-provider
 * accepts its issuer and the URLs of /token and of the endpoint called as the request's Host
 * spells them (OIDCContext.clientJwtAuthExpectedAudience, urlFor): a caller chose the host, so an
 * assertion made out to another server's /token (a hostile server a client with the same key
 * authenticates to: a metadata-document client's URL is its id everywhere) was taken here when
 * replayed with that server's name in Host. On this provider's own OIDCContext class, those URLs
 * are on `origins` (the issuer's, and the mTLS alias base's) whatever the request's Host.
 */
export function assertionAudiencesAt(provider: Provider, origins: readonly string[]): void {
  const prototype = provider.OIDCContext.prototype as unknown as {
    clientJwtAuthExpectedAudience(this: AudienceContext): Set<string>;
  };
  prototype.clientJwtAuthExpectedAudience = function (this: AudienceContext) {
    const paths = [this.urlFor('token'), this.urlFor(this.route)].map((url) => {
      const { pathname, search } = new URL(url);
      return `${pathname}${search}`;
    });
    return new Set([this.issuer, ...origins.flatMap((origin) => paths.map((path) => `${origin}${path}`))]);
  };
}

/** What clientJwtAuthExpectedAudience reads of its OIDC context. */
interface AudienceContext {
  issuer: string;
  route: string;
  urlFor(name: string): string;
}

/** `params` (an oidc-provider Params) with only its defined properties, added to a fresh object of its class (Object.keys: no pair per key). */
function givenOnly(params: object): object {
  const given = Object.create(Object.getPrototypeOf(params) as object | null) as Record<string, unknown>;
  for (const key of Object.keys(params)) {
    const value = (params as Record<string, unknown>)[key];
    if (value !== undefined) given[key] = value;
  }
  return given;
}

/** A client's JWK Set is fetched again for an unfamiliar kid at most this often (each fetch goes through the outbound guard). */
const UNFAMILIAR_KID_REFETCH_INTERVAL_MS = 10_000;

/**
 * 9. OIDC Core §10.1.1: a verifier that sees an unfamiliar `kid` goes back to the client's
 * `jwks_uri`, so that a relying party can rotate its keys. oidc-provider keeps a fetched set for
 * at least 60 s whatever kid it is asked for (its ClientKeyStore's `freshUntil`), so an RP that
 * rotated was refused `invalid_client` for up to a minute. A kid its set lacks makes the set
 * stale (oidc-provider's verification then fetches it again and retries), at most once per
 * UNFAMILIAR_KID_REFETCH_INTERVAL_MS per set. Once per process: the KeyStore class is shared.
 */
export function refetchClientKeysOnUnfamiliarKid(): void {
  const prototype = KeyStore.prototype as KeyStore & { refetchesUnfamiliarKids?: true };
  if (prototype.refetchesUnfamiliarKids) return;
  const select = prototype.selectForVerify;
  prototype.selectForVerify = function (this: ClientKeyStoreInternals, options) {
    const keys = select.call(this, options);
    const now = Date.now();
    // A stale set (never fetched, or expired) is fetched anyway: only a fresh one is made stale.
    if (keys.length === 0 && options.kid && this.jwksUri && this.fresh() && now >= (this.unfamiliarKidRefetchAt ?? 0)) {
      this.unfamiliarKidRefetchAt = now + UNFAMILIAR_KID_REFETCH_INTERVAL_MS;
      this.freshUntil = 0;
    }
    return keys;
  };
  prototype.refetchesUnfamiliarKids = true;
}

/** oidc-provider's ClientKeyStore, as far as the refetch reads it: the client's jwks_uri, and until when its set is fresh. */
interface ClientKeyStoreInternals extends KeyStore {
  jwksUri?: string;
  freshUntil?: number;
  fresh(): boolean;
  unfamiliarKidRefetchAt?: number;
}

interface IdTokenInternals {
  ctx?: KoaContextWithOIDC;
  set(key: string, value: unknown): void;
}

/** The built-in grant a handler of Arbiter's wraps: oidc-provider's own checks (PKCE, single use, rotation, DPoP) and issuance. */
export interface BuiltInGrant {
  grantType: string;
  parameters: Set<string>;
  handle(ctx: KoaContextWithOIDC): Promise<void>;
}

/**
 * 4. oidc-provider's client_credentials, authorization_code, refresh_token and device_code
 * (RFC 8628) handlers, to run after Arbiter's policy steps instead of re-implementing what they
 * verify and issue.
 */
export function builtInGrant(
  provider: Provider,
  grantType: 'client_credentials' | 'authorization_code' | 'refresh_token' | 'device_code',
): BuiltInGrant {
  const grant = builtInGrants[grantType];
  const helpers = Object.fromEntries(
    Object.entries(grantHelpers).map(([name, helper]) => [
      name,
      (helper as (...args: unknown[]) => unknown).bind(undefined, provider),
    ]),
  );
  return {
    grantType: grant.grantType,
    parameters: grant.parameters,
    handle: (ctx) => grant.handler(provider, helpers, ctx),
  };
}

/**
 * 11. oidc-provider's replay check of DPoP proofs and client assertions (`ReplayDetection.unique`)
 * looks the jti up, then saves it: requests sent at once all passed (RFC 9449 §11.1 wants one).
 * It is replaced by one atomic insert (`insertOnce`: false when the jti is stored already), kept a
 * window longer than oidc-provider keeps it, since a proof whose `iat` is ahead of the clock (it
 * accepts five minutes either way) stays acceptable until `iat` plus that window.
 */
export function atomicReplayDetection(
  provider: Provider,
  insertOnce: (id: string, payload: AdapterPayload, expiresAt: number) => Promise<boolean>,
): void {
  const model = provider.ReplayDetection as unknown as {
    unique: (iss: string, jti: string, exp: number) => Promise<boolean>;
  };
  model.unique = (iss, jti, exp) => {
    const id = createHash('sha256')
      .update(JSON.stringify([iss, jti]))
      .digest('base64url');
    const now = Math.floor(Date.now() / 1000);
    const keptUntil = exp + REPLAY_WINDOW_SECONDS;
    return insertOnce(
      id,
      { iss, kind: 'ReplayDetection', iat: now, exp: keptUntil } as AdapterPayload,
      keptUntil * 1000,
    );
  };
}

/** How far oidc-provider lets a DPoP proof's `iat` be from its clock (its CHALLENGE_OK_WINDOW). */
const REPLAY_WINDOW_SECONDS = 300;

/** A verified DPoP proof of the current request (RFC 9449 §4.3): its key's thumbprint. */
export interface DpopProof {
  thumbprint: string;
  jti: string;
  iat: number;
}

/**
 * 5. The DPoP proof of a token request answered by a grant of Arbiter's own (token exchange,
 * the UMA grant), verified as oidc-provider verifies it for its own grants (signature, typ,
 * htm, htu, iat window, nonce) and checked against replay for this client; undefined when the
 * request carries none. The built-in grants call the same helpers through `builtInGrant`; a
 * handler registered with `registerGrantType` has no public way to reach them.
 */
export async function verifiedDpopProof(provider: Provider, ctx: KoaContextWithOIDC): Promise<DpopProof | undefined> {
  const proof = await validateDpop(provider, ctx);
  if (proof) await checkDpopReplay(provider, ctx, proof, ctx.oidc.client!.clientId);
  return proof;
}

/**
 * 9. The DPoP proof that comes with a DPoP-bound access token at one of Arbiter's own APIs (RFC
 * 9449 §7.1: UMA, delegation, AuthZEN, Shared Signals, Bearer callers at /introspect), verified
 * as oidc-provider verifies one at UserInfo (signature, typ, alg, iat or the tenant's nonce, htm,
 * htu, `ath` of `accessToken`) and checked against replay for the token's client. `url` is the
 * URL the request names (its origin is pinned to this server's first: shared/dpop-origin.ts).
 * oidc-provider's helper reads the request through a context of its own routes; an API of
 * Arbiter's is none, so it is given one that names `url` as its route's. Throws oidc-provider's
 * InvalidDpopProof or UseDpopNonce (with the DPoP-Nonce header set); undefined without a proof.
 */
export async function verifiedResourceProof(
  provider: Provider,
  ctx: { method: string; get(field: string): string; set(field: string, value: string): void },
  request: { accessToken: string; clientId: string; url: string },
): Promise<DpopProof | undefined> {
  const route = 'arbiter-api';
  const proofContext = {
    method: ctx.method,
    get: (field: string) => ctx.get(field),
    set: (field: string, value: string) => ctx.set(field, value),
    // Koa's ctx.assert, which the replay check uses.
    assert: (value: unknown, error: Error) => {
      if (!value) throw error;
    },
    oidc: { provider, route, urlFor: (name: string) => (name === route ? request.url : provider.issuer) },
  } as unknown as KoaContextWithOIDC;
  const proof = await validateDpop(provider, proofContext, request.accessToken);
  // A replayed proof is a bad proof here (401 at a resource), not the token endpoint's invalid_grant.
  if (proof) await checkDpopReplay(provider, proofContext, proof, request.clientId, errors.InvalidDpopProof);
  return proof;
}

/**
 * 7. JWT access tokens (RFC 9068) are found by their value as opaque ones are, wherever
 * oidc-provider or Arbiter looks a token up: introspection, revocation, UserInfo and Bearer
 * callers all call the models' static `find` (through helpers/token_find.js, findTokenByValue).
 * oidc-provider stores no JWT access token and so finds none; Arbiter stores each under its
 * `jti` (token/jwt-access-tokens.ts), and this provider's AccessToken and ClientCredentials
 * classes look a JWT up there first. `lookup` answers undefined for any other value.
 */
export function findJwtAccessTokensToo(
  provider: Provider,
  lookup: (
    model: typeof provider.AccessToken | typeof provider.ClientCredentials,
    value: string,
    options?: { ignoreExpiration?: boolean },
  ) => Promise<object | undefined>,
): void {
  for (const model of [provider.AccessToken, provider.ClientCredentials]) {
    const find = model.find.bind(model) as (
      value: string,
      options?: { ignoreExpiration?: boolean },
    ) => Promise<unknown>;
    Object.defineProperty(model, 'find', {
      configurable: true,
      value: async (value: unknown, options?: { ignoreExpiration?: boolean }) => {
        const stored = typeof value === 'string' ? await lookup(model, value, options) : undefined;
        return stored
          ? new (model as unknown as new (payload: object) => unknown)(stored)
          : find(value as string, options);
      },
    });
  }
}

/** The OIDC context of a request Arbiter answers itself, as oidc-provider's router makes it for `route`. */
export type OwnRouteContext = KoaContextWithOIDC & { oidc: KoaContextWithOIDC['oidc'] & { body?: unknown } };

/**
 * 8. An endpoint Arbiter answers itself (/introspect: introspect/index.ts) with oidc-provider's own
 * client authentication (every method it is configured with, assertion replay checks, the secret
 * comparison above, WWW-Authenticate on a 401) and its token models. oidc-provider's router gives
 * each of its routes an OIDC context and runs it in its request store (`als`); neither is public,
 * so the context is made here as the router makes it, once per request, for `route` (a route name
 * the provider has: its URL is the audience client assertions may name).
 */
export function ownRouteContext(provider: Provider, ctx: ArbiterOwnedContext, route: string): OwnRouteContext {
  if (!ctx.oidc) {
    ctx._matchedRouteName = route;
    const oidc = new (provider as unknown as { OIDCContext: new (ctx: unknown) => unknown }).OIDCContext(ctx);
    Object.defineProperty(ctx, 'oidc', { value: oidc, configurable: true });
  }
  return ctx as unknown as OwnRouteContext;
}

/** The fields of a Koa context that ownRouteContext fills. */
export interface ArbiterOwnedContext {
  oidc?: unknown;
  _matchedRouteName?: string;
}

/**
 * Authenticates the client of a request in an own route context (ownRouteContext), from `body`
 * (the parsed form) and its headers, as oidc-provider does at its endpoints; `parameters` are the
 * endpoint's own besides the client authentication ones (they become `ctx.oidc.params`). Throws
 * oidc-provider's errors (invalid_client, invalid_request), answered by the caller.
 */
export async function authenticateClient(
  ctx: OwnRouteContext,
  body: Record<string, unknown>,
  parameters: readonly string[],
): Promise<NonNullable<KoaContextWithOIDC['oidc']['client']>> {
  ctx.oidc.body = body;
  const allowed = new Set([...parameters, ...getClientAuthParams(ctx)]);
  const chain = compose([
    (context: unknown, next: () => Promise<void>) => assembleParams(allowed, context, next),
    ...clientAuth,
  ] as never[]);
  await als.run(ctx, () => chain(ctx, async () => {}));
  return ctx.oidc.client!;
}

/**
 * A JWT introspection response (RFC 9701 §5) for the client `clientId`, as oidc-provider signs
 * one: `typ` token-introspection+jwt, `iss` the provider's issuer, `aud` the client, `iat`, and
 * `token_introspection` the JSON answer; signed with the tenant's key for the client's
 * `introspection_signed_response_alg` (oidc-provider's IdToken model, use "introspection").
 * Undefined when the client no longer exists. The client is the authenticated one, or found in
 * the request's store (a client ID metadata document's client is read through it).
 */
export async function signedIntrospection(
  provider: Provider,
  ctx: OwnRouteContext,
  clientId: string,
  answer: Record<string, unknown>,
): Promise<string | undefined> {
  return als.run(ctx, async () => {
    const authenticated = ctx.oidc.client;
    const client = authenticated?.clientId === clientId ? authenticated : await provider.Client.find(clientId);
    if (!client) return undefined;
    const token = new provider.IdToken({}, { ctx, client });
    Object.assign(token.extra, { token_introspection: answer });
    return token.issue({ use: 'introspection' });
  });
}
