/**
 * The baseline: a bare oidc-provider in this process, on its own loopback port, configured for
 * the same work as Arbiter's provider (src/oauth/configuration.ts, token-shaping.ts, routes.ts),
 * without Arbiter's policy, store, audit or HTTP edge. What Arbiter adds on top of the library is
 * then the difference between the two in the same run.
 *
 * Mirrored from Arbiter: the routes (/token, /introspect, /authorize), opaque access tokens
 * (resource indicators answering `accessTokenFormat: 'opaque'`), client_credentials,
 * introspection, RAR switched on with no types, the client authentication methods, the TTLs, the
 * refresh token rules (issued whenever the client may refresh, rotated only for public clients
 * or late in life), `expiresWithSession: false`, RS256 ID tokens with conformIdTokenClaims, the
 * scopes and claims, and a grant of its own for every authorization (Arbiter's policyConsent,
 * without the policy). Left to the library: plain client secrets (compared as strings, the
 * library's own cost; Arbiter's are BCrypt hashes), its own introspection response and
 * allowedPolicy, and the development interactions for the one sign-in the bench needs.
 *
 * Storage is oidc-provider's own in-memory adapter class, over a store with room for what a
 * bench run writes: the default instance is an LRU of 1,000 entries, which would evict the
 * session, the codes made ahead of a run and the token being introspected (that is the quick-start
 * adapter's size, not its cost). With `store` (BENCH_BASELINE_STORE), the artefacts go to
 * Arbiter's own adapter over that store instead: the library with Arbiter's durable storage and
 * nothing else of Arbiter's, which tells how much of the difference is the store.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider, { type ClientMetadata, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
// oidc-provider's own in-memory adapter and the LRU it stores in (no type declarations: see oidc-provider-internals.d.ts).
import MemoryAdapter from 'oidc-provider/lib/adapters/memory_adapter.js';
import LRU from 'oidc-provider/lib/helpers/lru.js';
import { createOidcAdapter } from '../adapters/oidc/index.js';
import type { TtlConfig } from '../src/config/index.js';
import { DEFAULT_TENANT, type Store } from '../src/store/index.js';
import { providerTtl } from '../src/oauth/configuration.js';
import { claims, scopes } from '../src/oauth/claims.js';
import { routes } from '../src/oauth/routes.js';
import { freePort } from '../test/support/server.js';

/** Scopes Arbiter learns at run time (recognizeScopes) from what its policy grants; the library needs them up front. */
const RESOURCE_SCOPES = ['read', 'introspection'];

/** Room enough for every artefact of a run (codes, grants, sessions, tokens, replay records). */
const STORE_ENTRIES = 50_000_000;

export interface Baseline {
  issuer: string;
  url: string;
  provider: Provider;
  close(): Promise<void>;
}

export interface BaselineOptions {
  /** Arbiter's lifetimes (its loaded configuration), so that both servers issue the same tokens. */
  ttl: TtlConfig;
  clients: ClientMetadata[];
  /** Arbiter's store for the artefacts, instead of the in-memory adapter; closed with the baseline. */
  store?: Store;
}

export async function startBaseline(options: BaselineOptions): Promise<Baseline> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
  const signingKey: JWK = { ...(await exportJWK(privateKey)), kid: randomUUID(), use: 'sig', alg: 'RS256' };
  const storage = new LRU({ maxSize: STORE_ENTRIES });
  const { ttl } = options;

  const configuration: Configuration = {
    adapter: options.store
      ? createOidcAdapter(options.store, DEFAULT_TENANT)
      : (model: string) => new MemoryAdapter(model, storage),
    clients: options.clients,
    routes: {
      authorization: routes.authorization,
      token: routes.token,
      introspection: routes.introspection,
      jwks: routes.jwks,
      userinfo: routes.userinfo,
      end_session: routes.end_session,
      revocation: routes.revocation,
    },
    jwks: { keys: [signingKey] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    claims,
    scopes: [...scopes, ...RESOURCE_SCOPES],
    responseTypes: ['code'],
    enabledJWA: { idTokenSigningAlgValues: ['RS256'] },
    conformIdTokenClaims: true,
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'],
    ttl: providerTtl(ttl),
    features: {
      // The one sign-in of the bench (Arbiter signs in at an upstream IdP instead).
      devInteractions: { enabled: true },
      userinfo: { enabled: true },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => undefined as never,
        useGrantedResource: async () => true,
        async getResourceServerInfo(ctx, resourceIndicator) {
          const requested = (ctx.oidc.params?.scope as string | undefined)?.split(' ') ?? [];
          return { scope: requested.join(' '), audience: resourceIndicator, accessTokenFormat: 'opaque' };
        },
      },
      richAuthorizationRequests: {
        enabled: true,
        types: {},
        authorizationDetailsForGrantSource: (_ctx: KoaContextWithOIDC, source: Carrier) => source.rar ?? [],
        authorizationDetailsForAccessToken: (_ctx: KoaContextWithOIDC, _token: unknown, source?: Carrier) =>
          source?.rar ?? [],
        authorizationDetailsForIntrospection: (_ctx: KoaContextWithOIDC, token: Carrier) => token.rar ?? [],
      },
    } as Configuration['features'],
    expiresWithSession: async () => false,
    async issueRefreshToken(_ctx, client) {
      return client.grantTypeAllowed('refresh_token');
    },
    rotateRefreshToken(ctx) {
      const { Client: client, RefreshToken: refreshToken } = ctx.oidc.entities;
      return client?.clientAuthMethod === 'none' || (refreshToken?.ttlPercentagePassed() ?? 0) >= 70;
    },
    // Arbiter's policyConsent without the policy: every authorization of a signed-in user gets a
    // grant of its own holding the requested OpenID Connect scopes.
    async loadExistingGrant(ctx) {
      const accountId = ctx.oidc.session?.accountId;
      if (!accountId) return undefined;
      const grant = new ctx.oidc.provider.Grant({ accountId, clientId: ctx.oidc.client!.clientId });
      const requested =
        (ctx.oidc.params?.scope as string | undefined)?.split(' ').filter((scope) => scope in claims) ?? [];
      if (requested.length) grant.addOIDCScope(requested.join(' '));
      await grant.save();
      return grant;
    },
    async findAccount(_ctx, sub) {
      return { accountId: sub, claims: () => ({ sub, name: sub, preferred_username: sub }) };
    },
  };

  const provider = new Provider(issuer, configuration);
  const server: Server = provider.listen(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    url,
    provider,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
      await options.store?.close();
    },
  };
}

/** A code, grant or token: whatever carries authorization details. */
type Carrier = { rar?: unknown[] };
