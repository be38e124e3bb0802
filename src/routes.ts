import {
  AdminApiKeys,
  AdminSessions,
  adminGate,
  adminSignIn,
  SIGN_IN_CALLBACK_PATH,
  SIGN_IN_PATH,
  SIGN_OUT_PATH,
} from './admin/index.js';
import { adminConsole } from './admin/console/serve.js';
import { adminApi } from './admin-api.js';
import { auditTrail, type AuditLog } from './audit/index.js';
import { authzenRouter } from './authzen/index.js';
import type { Config } from './config/index.js';
import { delegationRouter, revokeDelegationsOf } from './delegation/index.js';
import { runRoute, type Route } from './dispatch.js';
import { isAdminPath, isAdminSurfacePath } from './http/admin-path.js';
import { authFailureLimit } from './http/auth-failures.js';
import { jsonErrors } from './http/errors.js';
import { refuseNulInUrl } from './http/parameters.js';
import type { Logger } from './log/index.js';
import { METRICS_PATH, type Metrics } from './metrics/index.js';
import {
  advertisedFeatures,
  asMatched,
  clientCallers,
  DISCOVERY_PATH,
  inputParties,
  INTERACTION_PATH,
  OAUTH_SERVER_METADATA_PATH,
  oauthRoutes,
  oauthSteps,
  protocolRequest,
  REPEATABLE_PARAMETERS,
  tokenCallers,
  UMA_CONFIGURATION_PATH,
  UPSTREAM_CALLBACK_PATH,
  UPSTREAM_LOGOUT_PATH,
  type TenantProviders,
} from './oauth/index.js';
import { BUNDLE_PATH, type PolicyEngine, type PolicyLab } from './policy/index.js';
import { health, PROBE_PATHS } from './probes.js';
import type { ArbiterMiddleware } from './state.js';
import { windowsReadByTurn, type ClockSkew, type Sealer, type Store } from './store/index.js';
import { TenantRegistry } from './tenancy/index.js';
import type { Tracing } from './tracing/index.js';
import { SSF_RECEIVER_PATH, ssfReceiver } from './signals/receiver/index.js';
import { umaRouter } from './uma/index.js';
import type { WorkersReport } from './workers/protocol.js';
import type { Outbox } from './outbox/index.js';
import { signalsRouter, type PolicyChangeSignals, type Transmitter } from './signals/index.js';

export interface AppParts {
  config: Config;
  store: Store;
  /** Seals the secrets the Admin API is given and Arbiter must read back (src/store/sealed.ts). */
  sealer: Sealer;
  policy: PolicyEngine;
  /** Impact analysis and shadow policies (POST /admin/api/policy-impact, /admin/api/policy-shadow…). */
  lab: PolicyLab;
  audit: AuditLog;
  providers: TenantProviders;
  log: Logger;
  /** GET /metrics, and the timing of every request. */
  metrics: Metrics;
  /** In a worker process (WORKERS > 1): the workers of this machine that are up, for /healthz. */
  workers?: () => WorkersReport;
  /** A server span per request when an OTLP endpoint is configured; null: no tracing at all. */
  tracing?: Tracing | null;
  /** This node's clock against the store server's, for /readyz (absent: not compared). */
  clock?: ClockSkew;
  /** The Shared Signals transmitter and the durable outbox it delivers through (src/signals, src/outbox). */
  signals: { transmitter: Transmitter; outbox: Outbox; policy?: PolicyChangeSignals };
}

/** A route ready to run: its row and its steps composed. */
export type CompiledRoute = Route & { run: ArbiterMiddleware };

/**
 * The route table of the whole server: what runs, in order, for each path, after the global
 * steps (src/app.ts: the request frame, then the root that resolves the tenant and finds the
 * route here). Read a row to know everything Arbiter does for that endpoint before oidc-provider
 * (the OAuth rows' last step) or Arbiter's own handler answers.
 *
 * The steps most rows share, outermost first:
 * - `metrics`: times the request and counts its outcome;
 * - `audit`: the request's audit entry (written before the answer goes out: src/audit);
 * - `failureLimit`: failed credentials counted in the store (it sees the status the caller gets);
 * - `errors`: what is thrown below answered as `{error, error_description}`; a U+0000 in the URL refused.
 * - `protocol(…)`: the tenant exists and its provider is ready, the query is single-valued (src/oauth/edge.ts).
 */
export function routeTable(parts: AppParts): (path: string) => CompiledRoute {
  const { config, store, policy, audit, providers, log, metrics } = parts;
  const tenants = new TenantRegistry(store, config.tenants);
  const metered = metrics.middleware();
  const audited = auditTrail(audit, log);
  const failureLimit = authFailureLimit(
    { limit: config.authFailureLimit, windowSeconds: config.authFailureWindowSeconds },
    windowsReadByTurn(store),
  );
  const errors = jsonErrors(log, refuseNulInUrl);
  /** What an answer to a caller that may present a credential goes through; `audit` only where requests are audited. */
  const answered = [metered, audited, failureLimit, errors];
  const unaudited = [metered, failureLimit, errors];
  const origins = [config.issuer, ...(config.mtlsEndpointBaseUrl ? [config.mtlsEndpointBaseUrl] : [])];
  const protocol = (framing?: Parameters<typeof protocolRequest>[3]) =>
    protocolRequest(tenants, providers, origins, framing);

  const oauth = oauthSteps(parts);
  const oidc = (steps: ArbiterMiddleware[], framing: { uncached?: true; repeatable?: readonly string[] } = {}) => [
    ...answered,
    protocol({ ...framing, oidc: true }),
    ...steps,
    oauth.provider,
  ];
  const protectedApi = {
    store,
    policy,
    callers: tokenCallers((tenant) => providers.provider(tenant), config, config.issuer),
    parties: inputParties(store),
    issuer: config.issuer,
    maxBodyBytes: config.maxBodyBytes,
  };
  const uma = umaRouter({
    ...protectedApi,
    ticketSeconds: config.ttl.permissionTicketSeconds,
    resourcesPerOwner: config.umaResourcesPerOwner,
    resourceDeleted: (tenant, resourceId) => revokeDelegationsOf(store, tenant, { resourceId }),
  });
  const delegation = delegationRouter({ ...protectedApi, delegationsPerOwner: config.delegationsPerOwner });
  const authzen = authzenRouter({
    ...protectedApi,
    clients: clientCallers(store, parts.sealer),
    tenantExists: (tenant) => tenants.exists(tenant),
  });
  const signals = signalsRouter({
    ...protectedApi,
    sealer: parts.sealer,
    transmitter: parts.signals.transmitter,
    outbox: parts.signals.outbox,
    allowInsecureLoopback: config.outboundAllowInsecureLoopback,
    pollWaitSeconds: config.ssfPollWaitSeconds,
  });
  const adminKeys = new AdminApiKeys(store, config.adminApiKey);
  const adminSessions = new AdminSessions(store, config);

  const table = new PathTable();
  // Probes answer before anything else: they present no credential, and are never audited.
  const probes = row('probes', 'both', [
    metered,
    health(store, policy, config.policyLagBoundSeconds, parts.workers, parts.clock),
  ]);
  for (const path of PROBE_PATHS) table.exact(path, probes);
  // OPA's bundle download (on both listeners: it has its own token, wrong ones throttled like any credential).
  table.exact(BUNDLE_PATH, row('policy bundle', 'both', [...unaudited, policy.bundleMiddleware()]));
  // GET /metrics, behind METRICS_TOKEN when set (the admin listener's only, with ADMIN_PORT).
  table.exact(METRICS_PATH, row('metrics', 'admin', [...unaudited, metrics.endpoint(config.metricsToken)]));
  // Operators sign in to the console through an upstream OpenID provider (ADMIN_SIGN_IN_IDP; admin/sign-in.ts).
  const signIn = row('console sign-in', 'admin', [
    ...answered,
    adminSignIn({ config, store, sealer: parts.sealer, sessions: adminSessions, log }),
  ]);
  for (const path of [SIGN_IN_PATH, SIGN_IN_CALLBACK_PATH, SIGN_OUT_PATH]) table.exact(path, signIn);
  // The Admin API: every spelling of its paths behind the key or a console session (adminGate), audited.
  table.everySpelling(
    isAdminPath,
    row('Admin API', 'admin', [...answered, adminGate(adminKeys, adminApi(parts, adminKeys), adminSessions)], 'header'),
  );
  // The operators' console (/admin, /admin/assets/*): a static page that asks for the key itself.
  table.everySpelling(isAdminSurfacePath, row('console', 'admin', [metered, errors, adminConsole()]));
  // Arbiter's own APIs behind its access tokens: UMA protection (PAT), the delegation store, AuthZEN.
  table.where(uma.serves, row('UMA protection API', 'public', [...answered, protocol(), uma.routes], 'paths'));
  table.where(
    delegation.serves,
    row('delegation API', 'public', [...answered, protocol(), delegation.routes], 'paths'),
  );
  table.where(authzen.serves, row('AuthZEN', 'public', [...answered, protocol(), authzen.routes], 'paths'));
  table.where(signals.serves, row('Shared Signals', 'public', [...answered, protocol(), signals.routes], 'paths'));

  // The OAuth/OpenID Connect edge, one row per endpoint of the spec's routes table (oauth/routes.ts),
  // matched as oidc-provider's router matches paths (ASCII case-insensitive, one trailing slash ignored),
  // so that no spelling of an endpoint reaches oidc-provider without Arbiter's steps.
  const edge = (name: string, steps: ArbiterMiddleware[]) => row(name, 'public', steps, 'paths');
  table.oauth(
    oauthRoutes.authorization,
    edge('/authorize', oidc(oauth.authorize, { uncached: true, repeatable: REPEATABLE_PARAMETERS })),
  );
  table.oauthBelow(
    oauthRoutes.authorization,
    edge('/authorize/:uid', oidc(oauth.authorizationResumption, { uncached: true })),
  );
  // RFC 9126: client authentication as at /token, then the checks /authorize makes of what is pushed.
  table.oauth(oauthRoutes.pushed_authorization_request, edge('/par', oidc(oauth.par, { uncached: true })));
  table.oauth(oauthRoutes.token, edge('/token', oidc(oauth.token, { uncached: true })));
  // RFC 8628: device codes (clients authenticated as at /token), the user code page, and its sign-in's return.
  table.oauth(
    oauthRoutes.device_authorization,
    edge('/device/auth', oidc(oauth.deviceAuthorization, { uncached: true })),
  );
  table.oauth(oauthRoutes.code_verification, edge('/device', oidc(oauth.deviceVerification, { uncached: true })));
  table.oauthBelow(
    oauthRoutes.code_verification,
    edge('/device/:uid', oidc(oauth.deviceResumption, { uncached: true })),
  );
  table.oauth(oauthRoutes.introspection, edge('/introspect', oidc(oauth.introspect, { uncached: true })));
  table.oauth(oauthRoutes.revocation, edge('/revoke', oidc(oauth.revoke, { uncached: true })));
  table.oauth(oauthRoutes.userinfo, edge('/userinfo', oidc(oauth.userinfo, { uncached: true })));
  table.oauth(oauthRoutes.registration, edge('/register', oidc(oauth.register, { uncached: true })));
  table.oauthBelow(oauthRoutes.registration, edge('/register/:client', oidc(oauth.clientConfiguration)));
  // RP-Initiated Logout by POST as well as GET.
  table.oauth(oauthRoutes.end_session, edge('/session/end', oidc(oauth.endSession)));
  // The user's confirmation, where the session ends: answered once what the logout revokes is stored.
  table.oauthBelow(oauthRoutes.end_session, edge('/session/end/:step', oidc(oauth.endSessionConfirmation)));
  // What only Arbiter knows (its RAR types, its routers) added to oidc-provider's discovery document,
  // which is also the RFC 8414 metadata: one document at both paths (discovery.ts).
  table.oauth(DISCOVERY_PATH, edge('discovery', oidc(oauth.discovery)));
  table.oauth(OAUTH_SERVER_METADATA_PATH, edge('authorization server metadata', oidc(oauth.discovery)));
  if (advertisedFeatures.umaPermission.enabled)
    table.oauth(UMA_CONFIGURATION_PATH, edge('UMA configuration', oidc(oauth.umaConfiguration)));
  // Sign-in at the upstream identity provider.
  table.oauthBelow(INTERACTION_PATH, edge('sign-in', oidc(oauth.signIn)));
  table.oauth(UPSTREAM_CALLBACK_PATH, edge('upstream callback', oidc(oauth.signIn)));
  table.oauthBelow(UPSTREAM_CALLBACK_PATH, edge('upstream callback', oidc(oauth.signIn)));
  // The upstream's logout tokens (Back-Channel Logout 1.0): its user's sessions here end too.
  table.oauth(UPSTREAM_LOGOUT_PATH, edge('upstream logout', oidc(oauth.signIn, { uncached: true })));
  // Security Event Tokens an identity provider's Shared Signals transmitter pushes (RFC 8935): its users' tokens revoked.
  table.exact(
    SSF_RECEIVER_PATH,
    row('SSF receiver', 'public', [...answered, protocol({ uncached: true }), ssfReceiver(parts)], 'paths'),
  );
  // Any other path is oidc-provider's (JWKS, the logout confirmation, …, and its 404).
  table.otherwise(edge('oidc-provider', oidc([])));
  return (path) => table.find(path);
}

function row(
  name: string,
  listener: Route['listener'],
  steps: ArbiterMiddleware[],
  tenant?: Route['tenant'],
): CompiledRoute {
  const route: Route = { name, listener, steps, ...(tenant ? { tenant } : {}) };
  return { ...route, run: runRoute(route) };
}

/**
 * How the table finds a path's row, in this order: exact paths (the operators' and OPA's), the
 * admin surface in every spelling (before anything else can take a spelling of it, such as
 * `/interaction/../admin/api`), the OAuth rows as oidc-provider matches them (exact first, then
 * the rows for the paths below one), the rows that recognise their own paths (Arbiter's API
 * routers), else the last row.
 */
class PathTable {
  private readonly exactPaths = new Map<string, CompiledRoute>();
  private readonly spellings: { serves: (path: string) => boolean; route: CompiledRoute }[] = [];
  private readonly recognising: { serves: (path: string) => boolean; route: CompiledRoute }[] = [];
  private readonly oauthPaths = new Map<string, CompiledRoute>();
  private readonly oauthPrefixes: { prefix: string; route: CompiledRoute }[] = [];
  private fallback?: CompiledRoute;

  exact(path: string, route: CompiledRoute): void {
    this.exactPaths.set(path, route);
  }

  everySpelling(serves: (path: string) => boolean, route: CompiledRoute): void {
    this.spellings.push({ serves, route });
  }

  where(serves: (path: string) => boolean, route: CompiledRoute): void {
    this.recognising.push({ serves, route });
  }

  oauth(path: string, route: CompiledRoute): void {
    this.oauthPaths.set(asMatched(path), route);
  }

  oauthBelow(path: string, route: CompiledRoute): void {
    this.oauthPrefixes.push({ prefix: `${asMatched(path)}/`, route });
  }

  otherwise(route: CompiledRoute): void {
    this.fallback = route;
  }

  find(path: string): CompiledRoute {
    const operators = this.exactPaths.get(path) ?? this.spellings.find(({ serves }) => serves(path))?.route;
    if (operators) return operators;
    const matched = asMatched(path);
    return (
      this.oauthPaths.get(matched) ??
      this.oauthPrefixes.find(({ prefix }) => matched.startsWith(prefix))?.route ??
      this.recognising.find(({ serves }) => serves(path))?.route ??
      this.fallback!
    );
  }
}
