import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { stringify } from 'node:querystring';
import { compactVerify, createLocalJWKSet, type JWK } from 'jose';
import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import type { AccessToken, AdapterPayload, ClientCredentials, KoaContextWithOIDC, ResourceServer } from 'oidc-provider';
import type { Tenant } from '../../tenancy/index.js';
import { resourceServerRecords } from '../../catalog/index.js';
import { TurnReads, type Store } from '../../store/index.js';
import { providerIssuer, type ConfigurationSlice, type ProviderContext } from '../context.js';
import { formParameter } from '../shared/form-body.js';
import { CLAIM_SCOPES, DELEGATION_IDS, EXCHANGED_FROM, SUBJECT_ISSUER, type ArbiterContext } from '../state.js';

/**
 * RFC 9068 JWT access tokens, for the resource servers whose record asks for them
 * (`accessTokenFormat: "jwt"`; opaque is the default). oidc-provider signs them with the tenant's
 * keys (RS256, `typ: at+jwt`) and puts in them what the opaque token keeps server-side: `scope`,
 * `authorization_details` and the decision's other claims (token/shaping.ts, `extraTokenClaims`),
 * exactly as granted. It does not store them; Arbiter does (keepForLookup), so that a JWT access
 * token is still found by introspection and ended by revocation like an opaque one.
 */

export type AccessTokenFormat = 'opaque' | 'jwt';

/** A resource server record by its indicator, read at most once per event-loop turn (a token request asks several times). */
const formatsThisTurn = new TurnReads<AccessTokenFormat>();

/** What a registered, enabled resource server's record asks for; opaque for any other resource. */
export async function accessTokenFormatOf(
  store: Store,
  tenant: string,
  resourceIndicator: string,
): Promise<AccessTokenFormat> {
  return formatsThisTurn.read(store, `${tenant}\u0000${resourceIndicator}`, async () => {
    const server = await resourceServerRecords(store, tenant).findOne({ resourceIndicator });
    return server?.enabled !== false && server?.accessTokenFormat === 'jwt' ? 'jwt' : 'opaque';
  });
}

/** The format part of oidc-provider's ResourceServer (getResourceServerInfo, token exchange's issuance). */
export function resourceServerFormat(format: AccessTokenFormat): Pick<ResourceServer, 'accessTokenFormat' | 'jwt'> {
  // RS256: the one algorithm the tenant's keys are (src/oauth/keys.ts), as for ID tokens.
  return format === 'jwt'
    ? { accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } }
    : { accessTokenFormat: 'opaque' };
}

type TokenModel = AccessToken | ClientCredentials;
type TokenModelClass = typeof AccessToken | typeof ClientCredentials;

/** oidc-provider's customizer, run just before it signs a JWT access token. */
export const jwtAccessTokens: ConfigurationSlice = () => ({
  formats: {
    customizers: {
      async jwt(ctx, token, jwt) {
        Object.assign(jwt.payload, authenticationClaims(ctx));
        // Server-side only: the stored record keeps it (keepForLookup reads the token, not the JWT).
        delete jwt.payload[EXCHANGED_FROM];
        delete jwt.payload[DELEGATION_IDS];
        delete jwt.payload[CLAIM_SCOPES];
        delete jwt.payload[SUBJECT_ISSUER];
        await keepForLookup(token, jwt.payload);
      },
    },
  },
});

/**
 * RFC 9068 §2.2.1: `auth_time` and `acr` where the user's authentication is known, i.e. from the
 * code or refresh token the token is issued for (token exchange and client credentials have none).
 */
function authenticationClaims(ctx: KoaContextWithOIDC): Record<string, unknown> {
  const { AuthorizationCode: code, RefreshToken: refresh } = ctx.oidc.entities;
  const origin = code ?? refresh;
  return {
    ...(typeof origin?.authTime === 'number' ? { auth_time: origin.authTime } : {}),
    ...(typeof origin?.acr === 'string' ? { acr: origin.acr } : {}),
  };
}

/**
 * Stores what oidc-provider would have stored for an opaque token, under the JWT's `jti` and
 * marked `format: "jwt"`. The mark makes oidc-provider's own lookup refuse the record (its opaque
 * format only takes unmarked ones), so a `jti`, which resource servers may log, is never usable
 * as a bearer token: only the signed JWT finds it (jwtAccessTokenLookup). Being stored like any
 * other token, it goes with its grant, its client and its user when those are revoked. The
 * `saved` event lets the audit withdraw it when the request's entry cannot be written.
 */
async function keepForLookup(token: TokenModel, payload: { iat?: number; exp?: number }): Promise<void> {
  const model = token.constructor as TokenModelClass;
  const fields = token as unknown as Record<string, unknown>;
  const stored: Record<string, unknown> = { format: 'jwt' };
  for (const field of model.IN_PAYLOAD) if (fields[field] !== undefined) stored[field] = fields[field];
  stored.iat = payload.iat;
  stored.exp = payload.exp;
  const ttl = Math.max(1, (payload.exp ?? 0) - Math.floor(Date.now() / 1000));
  await model.adapter.upsert(token.jti, stored as AdapterPayload, ttl);
  token.emit('saved');
}

/** A compact JWS, and no longer than any JWT access token of ours can be (authorization details included). */
const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]+$/;
const MAX_JWT_LENGTH = 64 * 1024;

/** Whether a value may be a JWT access token of ours, before any lookup (callers bound opaque values tighter). */
export function looksLikeJwtAccessToken(value: string): boolean {
  return value.length <= MAX_JWT_LENGTH && JWT_SHAPE.test(value);
}

/** Finds the stored record of one of this provider's JWT access tokens by the token's value. */
export type JwtAccessTokenLookup = (
  model: TokenModelClass,
  value: string,
  options?: { ignoreExpiration?: boolean },
) => Promise<AdapterPayload | undefined>;

/**
 * A JWT access token of this provider, found by its `jti` once its signature checks out with the
 * tenant's keys (those it signs with, and those still published while tokens they signed live),
 * its `typ` is `at+jwt` and its `iss` this issuer; undefined for anything else (an opaque value,
 * another issuer's JWT, a revoked or expired one). The record, not the JWT, says what the token
 * is: kind, client, scopes and the decision's claims as issued. A bare `jti` is found only where
 * the request proved the JWT first (standInForJwtAccessTokens).
 */
export function jwtAccessTokenLookup(context: Pick<ProviderContext, 'config' | 'basePath' | 'secrets'>) {
  const keys = createLocalJWKSet({ keys: context.secrets.jwks.keys.map(publicMembers) });
  const issuer = providerIssuer(context);
  const lookup: JwtAccessTokenLookup = async (model, value, options = {}) => {
    const jti =
      provenInRequest.getStore() === value
        ? value
        : looksLikeJwtAccessToken(value)
          ? await verifiedJti(value, keys, issuer)
          : undefined;
    if (!jti) return undefined;
    const stored = await model.adapter.find(jti);
    if (!stored || stored.format !== 'jwt' || stored.kind !== model.name) return undefined;
    if (!options.ignoreExpiration && (typeof stored.exp !== 'number' || stored.exp <= Date.now() / 1000))
      return undefined;
    return stored;
  };
  return lookup;
}

async function verifiedJti(
  value: string,
  keys: ReturnType<typeof createLocalJWKSet>,
  issuer: string,
): Promise<string | undefined> {
  try {
    const { payload, protectedHeader } = await compactVerify(value, keys, { algorithms: ['RS256'] });
    if (protectedHeader.typ !== 'at+jwt') return undefined;
    const claims = JSON.parse(new TextDecoder().decode(payload)) as { iss?: unknown; jti?: unknown } | null;
    return claims?.iss === issuer && typeof claims.jti === 'string' ? claims.jti : undefined;
  } catch {
    return undefined;
  }
}

/** The `jti` of the JWT access token the current request presented, once verified (standInForJwtAccessTokens). */
const provenInRequest = new AsyncLocalStorage<string>();

/**
 * At /revoke and /introspect, oidc-provider refuses any JWT in `token` before it looks it up
 * (`unsupported_token_type`: it never stores its JWT access tokens). Arbiter does store them, so
 * a JWT access token of this tenant is handed on as its `jti`, found for the rest of this request
 * only (a bare `jti` is no token anywhere else). Any other JWT-shaped value becomes an unknown
 * one, as RFC 7009 §2.2 and RFC 7662 §2.2 answer an invalid token: 200 and `active: false`.
 */
export function standInForJwtAccessTokens(providerFor: (tenant: Tenant) => Provider) {
  return async function standIn(ctx: ArbiterContext, next: Next): Promise<void> {
    const value = formParameter(ctx, 'token');
    if (!value || !looksLikeJwtAccessToken(value)) return next();
    const provider = providerFor(ctx.state.tenant);
    const token = (await provider.AccessToken.find(value)) ?? (await provider.ClientCredentials.find(value));
    const standIn = token?.jti ?? `unknown-${randomBytes(16).toString('base64url')}`;
    const body = { ...ctx.state.body, token: standIn };
    ctx.state.body = body;
    (ctx.request as unknown as { body: string }).body = stringify(body);
    await provenInRequest.run(standIn, next);
  };
}

/** A signing key's public members (what /jwks publishes): verification needs no more. */
function publicMembers({ kty, kid, alg, n, e, crv, x, y }: JWK): JWK {
  return Object.fromEntries(
    Object.entries({ kty, kid, alg: alg ?? 'RS256', n, e, crv, x, y }).filter(([, value]) => value !== undefined),
  ) as JWK;
}
