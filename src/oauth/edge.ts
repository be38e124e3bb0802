import compose from 'koa-compose';
import type { Config } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { PolicyEngine } from '../policy/index.js';
import type { Sealer, Store } from '../store/index.js';
import { AUTHORIZE_PATH, authorizationResumptionMiddleware, authorizeMiddleware } from './authorize/index.js';
import { discoveryExtras, umaConfigurationAsDiscovery } from './discovery.js';
import { END_SESSION_PATH, endSessionMiddleware } from './end-session/index.js';
import { INTERACTION_PATH, interactionRoutes, UPSTREAM_CALLBACK_PATH } from './interactions/index.js';
import { INTROSPECT_PATH, introspectMiddleware } from './introspect/index.js';
import { PAR_PATH, parMiddleware } from './par/index.js';
import type { TenantProviders } from './providers.js';
import { REGISTER_PATH, registrationMiddleware } from './register/index.js';
import { REVOKE_PATH, revokeMiddleware } from './revoke/index.js';
import { advertisedFeatures, DISCOVERY_PATH, OAUTH_SERVER_METADATA_PATH, UMA_CONFIGURATION_PATH } from './routes.js';
import { shallowJsonQuery } from './shared/form-body.js';
import { syncAuthorizationDetailsTypes } from './shared/rar.js';
import { noStore } from './shared/no-store.js';
import { tenantHintOnInvalidClient } from './shared/tenant-hint.js';
import type { ArbiterMiddleware } from './state.js';
import { TOKEN_PATH, tokenMiddleware } from './token/index.js';
import { USERINFO_PATH, userinfoMiddleware } from './userinfo/index.js';
import type { Tenant } from '../tenancy/index.js';

export interface OAuthEdgeDeps {
  config: Config;
  store: Store;
  sealer: Sealer;
  policy: PolicyEngine;
  providers: TenantProviders;
  log: Logger;
}

/** One row of the route table. */
interface EdgeRoute {
  path: string;
  /** The row is for the paths below `path` (`{path}/…`) rather than `path` itself. */
  below?: true;
  /** Token, authorization and registration answers are never cached (RFC 6749 §5.1). */
  uncached?: true;
  /** What Arbiter adds at this endpoint, in order, before oidc-provider. */
  middleware: ArbiterMiddleware[];
}

/**
 * The OAuth/OpenID Connect edge as one route table, the way oidc-provider lists each of its
 * endpoints as one array of steps (lib/actions/token.js): each path of the spec's routes table
 * (routes.ts) maps to what Arbiter adds there, in order, and then to oidc-provider itself (one
 * instance per tenant). A request runs its own endpoint's steps and no other's; a path that is
 * not in the table goes straight to oidc-provider (JWKS, the logout confirmation, …). Every request first
 * has its JSON-valued query parameters kept shallow. Protocol code asks the policy engine and
 * relays its decision, it never decides.
 *
 * Paths are looked up as oidc-provider's router matches them (ASCII case-insensitive, one
 * trailing slash ignored), so that no spelling of an endpoint reaches oidc-provider without
 * Arbiter's steps: `POST /REGISTER` would otherwise register a client no policy decided on, and
 * `/token/` skip the failure limit and the body limit.
 */
export function oauthEdge({ config, store, sealer, policy, providers, log }: OAuthEdgeDeps): ArbiterMiddleware {
  const providerFor = (tenant: Tenant) => providers.provider(tenant);
  const authorizationDetailsTypes = () => policy.authorizationDetailsTypes();
  const { issuer, maxBodyBytes } = config;
  const registration = registrationMiddleware({ config, store, sealer, policy });
  const signIn = [interactionRoutes({ config, store, sealer, providers, log })];
  const discovery = discoveryExtras(issuer, authorizationDetailsTypes);
  const table: EdgeRoute[] = [
    {
      path: AUTHORIZE_PATH,
      uncached: true,
      middleware: authorizeMiddleware({ store, policy, providerFor, maxBodyBytes }),
    },
    { path: AUTHORIZE_PATH, below: true, uncached: true, middleware: authorizationResumptionMiddleware() },
    // RFC 9126: client authentication as at /token, then the checks /authorize makes of what is pushed.
    { path: PAR_PATH, uncached: true, middleware: parMiddleware({ store, policy, providerFor, maxBodyBytes }) },
    {
      path: TOKEN_PATH,
      uncached: true,
      middleware: tokenMiddleware({ issuer: config.issuer, providerFor, authorizationDetailsTypes, maxBodyBytes }),
    },
    {
      path: INTROSPECT_PATH,
      uncached: true,
      middleware: introspectMiddleware({ store, policy, issuer, providerFor, maxBodyBytes }),
    },
    { path: REVOKE_PATH, uncached: true, middleware: revokeMiddleware({ issuer, maxBodyBytes }) },
    { path: USERINFO_PATH, uncached: true, middleware: userinfoMiddleware(maxBodyBytes) },
    { path: REGISTER_PATH, uncached: true, middleware: registration.register },
    { path: REGISTER_PATH, below: true, middleware: registration.clientConfiguration },
    // RP-Initiated Logout by POST as well as GET.
    { path: END_SESSION_PATH, middleware: endSessionMiddleware({ issuer, maxBodyBytes }) },
    // What only Arbiter knows (its RAR types, its routers) added to oidc-provider's discovery document,
    // which is also the RFC 8414 metadata: one document at both paths (discovery.ts).
    { path: DISCOVERY_PATH, middleware: [discovery] },
    { path: OAUTH_SERVER_METADATA_PATH, middleware: [discovery] },
    ...(advertisedFeatures.umaPermission.enabled
      ? [{ path: UMA_CONFIGURATION_PATH, middleware: [umaConfigurationAsDiscovery, discovery] }]
      : []),
    // Sign-in at the upstream identity provider.
    { path: INTERACTION_PATH, below: true, middleware: signIn },
    { path: UPSTREAM_CALLBACK_PATH, middleware: signIn },
  ];
  // Every client oidc-provider loads carries the RAR types of policy data (clients/records.ts), which
  // its registry must then know: kept in step on every request that reaches it, not only at /token,
  // so that /introspect, /revoke or UserInfo on a node (or in a tenant) that has not seen /token yet
  // do not refuse the client as invalid metadata after a policy change.
  const provider = compose([
    syncAuthorizationDetailsTypes(providerFor, authorizationDetailsTypes),
    providers.middleware(),
  ]) as ArbiterMiddleware;
  return routeTable(table, provider);
}

/** Looks the request's path up in the table (exact paths first, then the rows for paths below one) and runs that row. */
function routeTable(table: EdgeRoute[], provider: ArbiterMiddleware): ArbiterMiddleware {
  const run = (route: Pick<EdgeRoute, 'uncached' | 'middleware'>) =>
    compose([
      ...(route.uncached ? [noStore] : []),
      tenantHintOnInvalidClient,
      shallowJsonQuery,
      ...route.middleware,
      provider,
    ]) as ArbiterMiddleware;
  const exact = new Map(table.filter((route) => !route.below).map((route) => [asMatched(route.path), run(route)]));
  const below = table
    .filter((route) => route.below)
    .map((route) => ({ prefix: `${asMatched(route.path)}/`, run: run(route) }));
  const elsewhere = run({ middleware: [] });
  return (ctx, next) => {
    const path = asMatched(ctx.path);
    return (exact.get(path) ?? below.find(({ prefix }) => path.startsWith(prefix))?.run ?? elsewhere)(ctx, next);
  };
}

/** A path as oidc-provider's router compares it (lib/helpers/router.js): ASCII letters folded, one trailing slash dropped. */
function asMatched(path: string): string {
  const folded = path.replace(/[a-z]+/g, (letters) => letters.toUpperCase());
  return folded.length > 1 && folded.endsWith('/') ? folded.slice(0, -1) : folded;
}
