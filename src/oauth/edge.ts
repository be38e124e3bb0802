import compose from 'koa-compose';
import type { Middleware } from 'koa';
import type { Config } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { PolicyEngine } from '../policy/index.js';
import type { Sealer, Store } from '../store/index.js';
import { authorizeEndpoint } from './authorize/index.js';
import { noStore } from './shared/no-store.js';
import { discoveryExtras } from './discovery.js';
import { guardClientCredentials } from './shared/credential-guard.js';
import { formBody } from './shared/form-body.js';
import { interactionRoutes } from './interactions/index.js';
import { introspectionEndpoint } from './introspect/index.js';
import type { TenantProviders } from './providers.js';
import { syncAuthorizationDetailsTypes } from './shared/rar.js';
import { registrationGate } from './register/gate.js';
import { tokenPrecheck } from './token/precheck.js';

export interface OAuthEdgeDeps {
  config: Config;
  store: Store;
  sealer: Sealer;
  policy: PolicyEngine;
  providers: TenantProviders;
  log: Logger;
}

/**
 * The OAuth/OpenID Connect edge: oidc-provider (one instance per tenant) and, in front of it,
 * what Arbiter adds at each of its endpoints. Each step below concerns one endpoint (or a
 * browser sign-in route) and passes every other request on; protocol code asks the policy
 * engine and relays its decision, it never decides.
 */
export function oauthEdge({ config, store, sealer, policy, providers, log }: OAuthEdgeDeps): Middleware {
  const providerFor = (tenant: string) => providers.provider(tenant);
  return compose([
    // /authorize, /token, /introspect, /userinfo, /register answers are never cached.
    noStore,
    // /.well-known/openid-configuration: what only Arbiter knows (its RAR types, its routers).
    discoveryExtras(config.issuer, () => policy.authorizationDetailsTypes()),
    // The forms of /token, /introspect, POST /authorize and /userinfo, read once with the size limit; JSON-valued parameters kept shallow.
    formBody(config.maxBodyBytes),
    // /token and /introspect: a client that failed too often is refused before its credentials are verified.
    guardClientCredentials,
    // /authorize
    authorizeEndpoint(store, policy, providerFor),
    // /token: requests refused before client authentication.
    tokenPrecheck,
    // /authorize and /token: the RAR types policy data defines.
    syncAuthorizationDetailsTypes(providerFor, () => policy.authorizationDetailsTypes()),
    // /register: the `register` decision.
    registrationGate({ config, store, policy }),
    // /introspect: Bearer callers and the `introspect` decision on every call.
    introspectionEndpoint({ store, policy, issuer: config.issuer, providerFor }),
    // /interaction/*, /idp/callback: sign-in at the upstream identity provider; /userinfo's challenge.
    interactionRoutes({ config, store, sealer, providers, log }),
    // oidc-provider itself: discovery, JWKS, /authorize, /token, /introspect, /register, /userinfo.
    providers.middleware(),
  ]) as Middleware;
}
