// oidc-provider's built-in grant handlers and their helpers. They are not part of its typed
// public API; Arbiter wraps them (see gate.ts) instead of re-implementing PKCE, code
// consumption and token issuance. Pinned to oidc-provider 9.13.x in package.json.
declare module 'oidc-provider/lib/actions/grants/index.js' {
  interface BuiltInGrant {
    handler: (provider: unknown, helpers: Record<string, unknown>, ctx: unknown) => Promise<void>;
    parameters: Set<string>;
    grantType: string;
  }
  export const authorization_code: BuiltInGrant;
  export const client_credentials: BuiltInGrant;
  export const refresh_token: BuiltInGrant;
  export const device_code: BuiltInGrant;
}

declare module 'oidc-provider/lib/helpers/grants.js' {
  const helpers: Record<string, (...args: unknown[]) => unknown>;
  export = helpers;
}

declare module 'oidc-provider/lib/helpers/weak_cache.js' {
  /** oidc-provider's private per-instance state (configuration, grant handlers, …). */
  export default function instance(provider: unknown): {
    configuration: { scopes: Set<string> };
    features: { richAuthorizationRequests: { types: Record<string, { validate(): void }> } };
  };
}

declare module 'oidc-provider/lib/helpers/token_find.js' {
  /** Finds an access token, client-credentials token or refresh token by value (honouring the hint). */
  export function findToken(
    provider: unknown,
    value: string,
    hint?: string,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- oidc-provider's token claims are untyped
  ): Promise<(import('oidc-provider').BaseToken & Record<string, any>) | undefined>;
}

declare module 'oidc-provider/lib/helpers/validate_dpop.js' {
  interface DpopProof {
    thumbprint: string;
    jti: string;
    iat: number;
  }
  /** Verifies the request's DPoP header (undefined when there is none); throws InvalidDpopProof / UseDpopNonce. */
  export default function validateDpop(
    provider: unknown,
    ctx: unknown,
    accessToken?: string,
  ): Promise<DpopProof | undefined>;
  /** Refuses a proof whose jti this client already used within the acceptance window. */
  export function checkDpopReplay(
    provider: unknown,
    ctx: unknown,
    proof: DpopProof,
    clientId: string,
    ErrorClass?: unknown,
  ): Promise<void>;
}

declare module 'oidc-provider/lib/helpers/als.js' {
  import type { AsyncLocalStorage } from 'node:async_hooks';
  /** The request oidc-provider's helpers read as the current one (its router runs every route in it). */
  const als: AsyncLocalStorage<unknown>;
  export default als;
}

declare module 'oidc-provider/lib/shared/assemble_params.js' {
  /** Sets `ctx.oidc.params` to the allowed parameters of `ctx.oidc.body` (POST) or the query. */
  export default function assembleParams(allowList: Set<string>, ctx: unknown, next: () => Promise<void>): unknown;
}

declare module 'oidc-provider/lib/shared/client_auth.js' {
  type Middleware = (ctx: unknown, next: () => Promise<void>) => Promise<unknown> | unknown;
  /** oidc-provider's client authentication: duplicate credentials refused, WWW-Authenticate on 401, the client authenticated. */
  const clientAuth: Middleware[];
  export default clientAuth;
  /** The form parameters the configured client authentication methods read (client_id, client_secret, client_assertion…). */
  export function getClientAuthParams(ctx: unknown): Set<string>;
}

declare module 'oidc-provider/lib/helpers/jwt.js' {
  /** Verifies a JWS with a key of `keystore` (its alg and kid), then its claims (exp unless ignored, iss when given). */
  export function verify(
    jwt: string,
    keystore: unknown,
    options?: { issuer?: string; ignoreExpiration?: boolean },
  ): Promise<{ payload: Record<string, unknown>; header: Record<string, unknown> }>;
}

declare module 'oidc-provider/lib/helpers/keystore.js' {
  /** The JWK store of a client's keys (and, beside it, its `jwks_uri` cache: ClientKeyStore in lib/models/client.js). */
  export default class KeyStore {
    selectForVerify(options: { alg?: string; kid?: string }): unknown[];
  }
}
