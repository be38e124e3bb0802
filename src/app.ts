import Koa, { type Context, type Next } from 'koa';
import { AdminApiKeys, adminGate, adminRouter, type AdminRecord } from './admin/index.js';
import { adminConsole } from './admin/console/serve.js';
import { auditTrail, type AuditLog } from './audit/index.js';
import { authzenRouter, authzenTenantPaths } from './authzen/index.js';
import type { Config } from './config/index.js';
import { authFailureLimit } from './http/auth-failures.js';
import { jsonErrors, notFound, retryAfterUnavailable } from './http/errors.js';
import { accessLog } from './http/access-log.js';
import { forwardedHeaders } from './http/forwarded.js';
import { splitListeners } from './http/listeners.js';
import { requestId } from './http/request-id.js';
import { refuseNulInUrl, singleValuedQuery } from './http/parameters.js';
import { securityHeaders } from './http/security-headers.js';
import type { Logger } from './log/index.js';
import { METRICS_PATH, type Metrics } from './metrics/index.js';
import { delegationRouter } from './delegation/index.js';
import {
  clientCallers,
  inputParties,
  oauthEdge,
  REPEATABLE_QUERY_PARAMETERS,
  tokenCallers,
  type ArbiterState,
  type TenantProviders,
} from './oauth/index.js';
import { BUNDLE_PATH, dataEntryProblem, type PolicyEngine, type PolicyFault, type PolicyLab } from './policy/index.js';
import type { ClockSkew, Sealer, Store } from './store/index.js';
import type { Tracing } from './tracing/index.js';
import { requireKnownTenant, tenancy, tenantPaths, TenantRegistry } from './tenancy/index.js';
import { isAdminSurfacePath } from './http/admin-path.js';
import { umaRouter } from './uma/index.js';
import type { WorkersReport } from './workers/protocol.js';

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
}

/** The whole HTTP surface as one Koa middleware stack; the order is the request's path through Arbiter. */
export function createApp(parts: AppParts): Koa<ArbiterState> {
  const { config, store, sealer, policy, audit, providers, log, metrics, tracing } = parts;
  // Forwarded headers reach Koa only from configured proxies (see forwardedHeaders).
  const app = new Koa<ArbiterState>({ proxy: true, maxIpsCount: 1 });
  app.silent = true;
  // First, so that the request's span covers all of it; probes, OPA's bundle polls and scrapes make none.
  if (tracing) app.use(tracing.middleware([...PROBE_PATHS, BUNDLE_PATH, METRICS_PATH]));
  app.use(securityHeaders);
  app.use(retryAfterUnavailable);
  app.use(requestId);
  app.use(accessLog(log, config.accessLog));
  // /t/<tenant>/…: the tenant's own issuer, for every protocol endpoint (not the admin surface, probes, metrics or bundle).
  app.use(tenantPaths(isOperatorPath));
  // ADMIN_PORT: the admin surface on its own listener only; the probes and OPA's bundle (its own token) on both.
  if (config.adminPort !== null)
    app.use(splitListeners({ shared: [...PROBE_PATHS, BUNDLE_PATH], adminOnly: [METRICS_PATH] }));
  app.use(metrics.middleware());
  app.use(forwardedHeaders(config.trustedProxies));
  // AuthZEN's per-tenant path form (/<tenant>/access/v1/…) is X-Tenant-Id by another name.
  app.use(authzenTenantPaths);
  // Probes: answered before anything else, they present no credential.
  app.use(health(store, policy, config.policyLagBoundSeconds, parts.workers, parts.clock));
  app.use(auditTrail(audit, log));
  // Counted in the store: every node and worker on it shares the counts.
  app.use(authFailureLimit({ limit: config.authFailureLimit, windowSeconds: config.authFailureWindowSeconds }, store));
  app.use(jsonErrors(log));
  // U+0000 in the path, the query or Basic credentials: a 400 before anything reads or stores it (bodies: as they are read).
  app.use(refuseNulInUrl);
  // OPA's bundle download: wrong bundle tokens are throttled like any credential; OPA's right one always gets through.
  app.use(policy.bundleMiddleware());
  // GET /metrics, behind METRICS_TOKEN when set (on the admin listener only with ADMIN_PORT: splitListeners above).
  app.use(metrics.endpoint(config.metricsToken));
  app.use(tenancy);
  // The operators' console (/admin, /admin/assets/*): a static page that asks for the key itself.
  app.use(adminConsole());
  const adminKeys = new AdminApiKeys(store, config.adminApiKey);
  app.use(adminGate(adminKeys, adminApi(parts, adminKeys)));
  // The protocol surface: only tenants that exist, single-valued parameters, then the OAuth edge.
  const tenants = new TenantRegistry(store, config.tenants);
  app.use(requireKnownTenant(tenants));
  // The tenant's oidc-provider, with its own signing keys (read once per rotation), ready for every step below.
  app.use(providers.prepare());
  app.use(singleValuedQuery(REPEATABLE_QUERY_PARAMETERS));
  // Arbiter's own APIs behind its access tokens: UMA protection (PAT), the delegation store, AuthZEN.
  const protectedApi = {
    store,
    policy,
    callers: tokenCallers((tenant) => providers.provider(tenant)),
    parties: inputParties(store),
    issuer: config.issuer,
    maxBodyBytes: config.maxBodyBytes,
  };
  app.use(umaRouter({ ...protectedApi, ticketSeconds: config.ttl.permissionTicketSeconds }));
  app.use(delegationRouter(protectedApi));
  app.use(
    authzenRouter({
      ...protectedApi,
      clients: clientCallers(store, sealer),
      tenantExists: (tenant) => tenants.exists(tenant),
    }),
  );
  app.use(oauthEdge({ config, store, sealer, policy, providers, log }));
  app.use(() => {
    throw notFound('no such endpoint');
  });
  return app;
}

/** The Admin API's router, with the checks that only the policy engine can make. */
function adminApi({ config, store, sealer, policy, lab, audit }: AppParts, keys: AdminApiKeys) {
  const recordedInputs = () => audit.recentPolicyInputs(config.policyCheckRecordedInputs);
  /** The check of one file on its own: its syntax and package (Rego, Cedar), a data entry's JSON and key. */
  const fileChecks: Record<string, (record: Record<string, unknown>) => Promise<string | null>> = {
    'policy-rules': (rule) =>
      policy.validateRule(rule.kind as 'rego' | 'cedar', rule.path as string, rule.content as string),
    'policy-data': async (data) => dataEntryProblem(data.dataKey as string, data.payload as string),
  };
  return adminRouter(store, {
    keys,
    sealer,
    maxBodyBytes: config.maxBodyBytes,
    audit,
    policy,
    issuer: config.issuer,
    // Each file on its own first (its syntax, its package), then the bundle it would make as a whole:
    // compiled, and tried on the contract's examples and the inputs recently recorded in the audit log.
    checks: {
      'policy-rules': async (rule, { tenantId, existing }) =>
        (await fileChecks['policy-rules'](rule)) ??
        policy.bundleProblemWith({
          collection: 'rules',
          record: rule,
          tenantId,
          replacesId: existing?.id,
          recordedInputs,
          shadow: rule.mode === 'shadow',
        }),
      'policy-data': async (data, { tenantId, existing }) =>
        (await fileChecks['policy-data'](data)) ??
        policy.bundleProblemWith({
          collection: 'data',
          record: data,
          tenantId,
          replacesId: existing?.id,
          recordedInputs,
          shadow: data.mode === 'shadow',
        }),
    },
    // A deletion makes a bundle too: it must still compile and decide.
    removalChecks: {
      'policy-rules': async (existing, { tenantId }) =>
        policy.bundleProblemWith({
          collection: 'rules',
          record: null,
          tenantId,
          replacesId: existing.id,
          recordedInputs,
          shadow: existing.mode === 'shadow',
        }),
      'policy-data': async (existing, { tenantId }) =>
        policy.bundleProblemWith({
          collection: 'data',
          record: null,
          tenantId,
          replacesId: existing.id,
          recordedInputs,
          shadow: existing.mode === 'shadow',
        }),
    },
    historyVersions: config.policyHistoryVersions,
    tenants: config.tenants,
    decorate: { 'policy-data': (data: AdminRecord) => ({ inBundle: isBundled(data) }) },
    // A proposed change is checked file by file, then as one bundle (the lab's), before its impact is replayed.
    policyLab: { lab, fileChecks, recordedInputs },
  });
}

/** The probes: /livez (the process answers), /readyz (it can serve) and /healthz (and the policy's own faults), see health. */
const HEALTH_PATH = '/healthz';
const READINESS_PATHS = new Set([HEALTH_PATH, '/readyz']);
const LIVENESS_PATH = '/livez';
const PROBE_PATHS = [...READINESS_PATHS, LIVENESS_PATH];

/** What operators and their tools reach, and tenants never do: no /t/<tenant> form (any spelling). */
function isOperatorPath(path: string): boolean {
  const spelling = path.toLowerCase().replace(/\/+$/, '');
  return isAdminSurfacePath(path) || [...PROBE_PATHS, METRICS_PATH, BUNDLE_PATH].includes(spelling);
}

/**
 * GET /livez: 200 while the process answers at all, whatever the store or OPA say, so that a
 * liveness probe never restarts a server that only waits for OPA to come back (OPA restarting
 * makes readiness 503 for about a second).
 *
 * GET /readyz: "this node can serve", 200 or 503, within PROBE_TIMEOUT_MS whatever hangs. The
 * store answers and takes a write (a counter of its shared windows: a full disk, a held write
 * lock or a server that is down or frozen fails it, where a read would still pass); the policy
 * can decide (OPA has activated a bundle, or the revision the store holds is evaluated in
 * process); OPA does not serve an older revision than the store's for longer than
 * POLICY_LAG_BOUND_SECONDS (it refused the new bundle, or cannot fetch it: this node would decide
 * on stale policy); every configured worker is up. It says which bundle revision the store holds
 * and which one OPA serves, so that operators (and tests) can wait for a policy change to be in
 * force instead of guessing.
 *
 * GET /healthz: the same, and also the policy's own faults (PolicyEngine.policyFaults): a point
 * the policy in force cannot decide (its own evaluation error) makes it 503 `degraded`, naming
 * the point and the engine's error. Those are not readiness: they follow the traffic a node gets
 * (one client's data can make its own decisions fail), and every node shares the policy, so a
 * load balancer draining nodes for them would take the service down for every client.
 */
function health(
  store: Store,
  policy: PolicyEngine,
  lagBoundSeconds: number,
  workers?: () => WorkersReport,
  clock?: ClockSkew,
) {
  let behindSince: number | null = null;
  return async (ctx: Context, next: Next): Promise<void> => {
    if (ctx.path === LIVENESS_PATH) {
      ctx.body = { status: 'alive' };
      return;
    }
    if (!READINESS_PATHS.has(ctx.path)) return next();
    const [storeUp, opaReady, revisions] = await Promise.all([
      withinProbeTime(storeTakesWrites(store), false),
      withinProbeTime(policy.isReady(), false),
      withinProbeTime(policy.revisions(), null),
    ]);
    const policyReady = opaReady || (revisions !== null && revisions.inProcess === revisions.store);
    const faults =
      revisions && policyReady ? await withinProbeTime(policy.policyFaults(revisions), [] as PolicyFault[]) : [];
    const failing = ctx.path === HEALTH_PATH ? faults.filter((fault) => fault.failing) : [];
    behindSince = revisions && revisions.opa !== revisions.store ? (behindSince ?? Date.now()) : null;
    const lagSeconds = behindSince === null ? 0 : Math.floor((Date.now() - behindSince) / 1000);
    const lagging = lagSeconds > lagBoundSeconds;
    const report = workers?.();
    const workersMissing = report ? report.configured - report.up.length : 0;
    const clockProblem = clock?.problem ?? null;
    const ready = storeUp && policyReady && !lagging && workersMissing <= 0 && clockProblem === null;
    ctx.status = ready && failing.length === 0 ? 200 : 503;
    ctx.body = {
      status: ctx.status === 200 ? 'ok' : storeUp && policyReady && !clockProblem ? 'degraded' : 'unavailable',
      store: storeUp ? 'up' : 'down',
      ...(clockProblem ? { clock: clockProblem } : {}),
      policy: !policyReady
        ? 'not ready'
        : lagging
          ? `OPA has served an older revision than the store's for ${lagSeconds} s (a refused bundle?)`
          : failing.length
            ? `the policy in force cannot decide ${failing.map((fault) => `${fault.point} (${fault.error})`).join('; ')}`
            : 'ready',
      ...(faults.length ? { policyFaults: faults } : {}),
      ...(revisions ? { policyRevision: revisions } : {}),
      ...(report ? { workers: report } : {}),
    };
  };
}

/** Each check of a probe answers within this, so that a probe never hangs on a frozen dependency. */
const PROBE_TIMEOUT_MS = 1000;
/** The counter the readiness probe writes: one short window, purged with the other ended windows. */
const READINESS_WRITE_KEY = 'readiness-probe';

async function storeTakesWrites(store: Store): Promise<boolean> {
  await store.ping();
  await store.addToWindow(READINESS_WRITE_KEY, PROBE_TIMEOUT_MS);
  return true;
}

/** The check's answer, or `otherwise` when it fails or takes longer than PROBE_TIMEOUT_MS. */
function withinProbeTime<T>(check: Promise<T>, otherwise: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(otherwise), PROBE_TIMEOUT_MS)));
  return Promise.race([check.catch(() => otherwise), late]).finally(() => clearTimeout(timer));
}

function isBundled(record: { tenantId?: unknown; version?: unknown; mode?: unknown }): boolean {
  return !record.tenantId && !record.version && record.mode !== 'shadow';
}
