import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { describeBound, markAdminListener, reachableOrigin } from './http/listeners.js';
import { tlsServerOptions } from './http/tls.js';
import { answerParserRefusals } from './http/parser-refusals.js';
import { createApp } from './app.js';
import { AuditLog, decisionsOfEntry } from './audit/index.js';
import type { Config } from './config/index.js';
import type { Logger } from './log/index.js';
import {
  BACKCHANNEL_LOGOUT_TOPIC,
  createTenantProvider,
  deliverKeptLogout,
  loadProviderSecrets,
  storedTenantKeys,
  TenantProviders,
  watchSigningKeyRotations,
} from './oauth/index.js';
import { storeTenant, TenantRegistry } from './tenancy/index.js';
import { Metrics } from './metrics/index.js';
import { BUNDLE_PATH, createPolicyEngine, PolicyLab, seedDefaultPolicies, type PolicyEngine } from './policy/index.js';
import { openArbiterStore } from './collections.js';
import { MIGRATIONS } from './migrations.js';
import { ClockSkew, migrate, Sealer, type Store } from './store/index.js';
import { startTracing } from './tracing/index.js';
import type { WorkerLink } from './workers/worker.js';
import { outboundOptionsOf, sharedOutbound } from './http/outbound.js';
import { Outbox } from './outbox/index.js';
import { PolicyChangeSignals, Transmitter, userLogout } from './signals/index.js';

export interface RunningServer {
  /** Where this host reaches the public listener (its address, or loopback for every interface; the real port). */
  url: string;
  /** Where this host reaches the admin listener (ADMIN_PORT); null when the admin surface shares the public one. */
  adminUrl: string | null;
  /** The addresses really bound, for the start-up line: `http://[::]:9000 (every interface)`. */
  listening: { public: string; admin: string | null };
  server: Server;
  store: Store;
  close(): Promise<void>;
}

export interface ServerOptions {
  /**
   * Set in a worker process (WORKERS > 1, src/workers): the machine's OPA and Wasm compilations
   * come from the primary, /healthz lists the workers, /metrics sums them all.
   */
  worker?: WorkerLink;
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * What a first start makes, and every start checks: the store at this release's schema, the
 * sealing key, the signing and cookie keys (the default tenant's and those of the tenants in
 * TENANTS; another tenant's are made with it), the default policy pack. Safe to run in several
 * processes at once (each write is insert-if-absent); the primary of several workers runs it
 * before starting them, so that the workers only read what it made. `traced` wraps the store
 * (tracing, when an OTLP endpoint is set).
 */
export async function prepareStore(
  config: Config,
  log: Logger,
  { warn = true, traced }: { warn?: boolean; traced?: (store: Store) => Store } = {},
) {
  const opened = await openArbiterStore(config.storeUrl, { sqliteLockWaitMs: config.storeSqliteLockWaitMs });
  const store = traced ? traced(opened) : opened;
  try {
    const schema = await migrate(store, MIGRATIONS);
    if (schema.from !== schema.to) log.info(schema, 'store schema migrated');
    const sealer = await Sealer.open(store, config.secretsKey, config.secretsKeyPrevious);
    if (warn) startupWarnings(config, sealer, log);
    if (warn) for (const caveat of opened.caveats ?? []) log.warn(caveat);
    await Promise.all(
      [null, ...config.tenants].map((tenant) => loadProviderSecrets(store, sealer, storeTenant(tenant))),
    );
    await seedDefaultPolicies(store, log);
    return { store, sealer };
  } catch (error) {
    await store.close();
    throw error;
  }
}

function startupWarnings(config: Config, sealer: Sealer, log: Logger): void {
  if (!config.softwareStatementVerify) {
    log.warn(
      'SERVICE_SOFTWARE_STATEMENT_VERIFY is false: software statements are still verified whenever policy data trusts an issuer for them; otherwise they reach the policy unverified (the default pack refuses them)',
    );
  }
  if (!sealer.protective)
    log.warn(
      'SERVICE_SECRETS_KEY is not set: secrets kept in the store are sealed with a key kept in the store itself (development only)',
    );
}

/**
 * Opens the store, listens, then starts the policy engine: a managed OPA polls this very
 * server for its bundle, so it can only be pointed at the port once the port is known (a
 * worker's primary starts the machine's OPA once the first worker tells it the port).
 */
export async function startServer(config: Config, log: Logger, options: ServerOptions = {}): Promise<RunningServer> {
  const { worker } = options;
  // Tracing (OTLP endpoint set) wraps the store and the policy engine; without it both are used as they are.
  const tracing = startTracing(config, log);
  const prepared = await prepareStore(config, log, {
    // A worker's primary has said the warnings once for the machine.
    warn: !worker,
    traced: tracing ? (opened) => tracing.traced(opened, config.storeUrl) : undefined,
  }).catch(async (error: unknown) => {
    await tracing?.close();
    throw error;
  });
  const { store, sealer } = prepared;
  let appReady: (handler: Handler) => void = () => undefined;
  const app = new Promise<Handler>((resolve) => (appReady = resolve));
  let handle: Handler = (request, response) => starting(request, response, app, worker !== undefined);
  const inFlight = new InFlight();
  const track = (request: IncomingMessage, response: ServerResponse) => inFlight.track(request, response, handle);
  // TLS_CERT_FILE: the public listener speaks HTTPS itself and sees clients' certificates (RFC 8705).
  const tls = tlsServerOptions(config);
  const scheme = tls ? 'https' : 'http';
  const server: Server = tls
    ? createHttpsServer({ ...httpLimits(config), ...tls }, track)
    : createServer(httpLimits(config), track);
  const adminServer =
    config.adminPort === null
      ? null
      : createServer(httpLimits(config), (request, response) => {
          markAdminListener(request);
          inFlight.track(request, response, handle);
        });
  const servers = adminServer ? [server, adminServer] : [server];
  for (const each of servers) {
    each.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
    answerParserRefusals(each, log.child({ component: 'http' }));
  }
  const bound = await listen(server, config.port, config.bindAddress);
  const adminBound = adminServer
    ? await listen(adminServer, config.adminPort!, config.adminBindAddress).catch(async (error: unknown) => {
        await new Promise((resolve) => server.close(resolve));
        throw error;
      })
    : null;
  const url = reachableOrigin(bound, scheme);
  const adminUrl = adminBound ? reachableOrigin(adminBound) : null;
  let engine: PolicyEngine | undefined;
  const metrics = new Metrics(store, () => engine, worker && (() => worker.clusterMetrics()));
  worker?.serveRegistry(() => metrics.registry.getMetricsAsJSON());
  await worker?.listening(url, adminUrl);
  // The managed OPA fetches its bundle where operators' traffic goes (the admin listener, when there is one).
  const decider = await createPolicyEngine({
    config,
    store,
    log,
    bundleUrl: `${adminUrl ?? url}${BUNDLE_PATH}`,
    sharedOpa: worker?.sharedOpa(),
    compileWasm: worker?.compileWasm,
  });
  const policy = (engine = metrics.observed(tracing ? tracing.observed(decider) : decider));
  // The durable outbox (src/outbox) and the Shared Signals transmitter that delivers through it.
  const tenants = new TenantRegistry(store, config.tenants);
  const outbox = new Outbox(
    store,
    {
      pollMs: config.outboxPollMs,
      leaseMs: config.outboxLeaseSeconds * 1000,
      backoffMs: 1000,
      maxBackoffMs: config.outboxRetryMaxSeconds * 1000,
      batch: 100,
      // An entry of a tenant removed from TENANTS is given up at once, not retried until its maximum age.
      tenantExists: (tenant) => tenants.exists(tenant),
    },
    log.child({ component: 'outbox' }),
  );
  const transmitter = new Transmitter({
    store,
    sealer,
    outbox,
    outbound: sharedOutbound(outboundOptionsOf(config)),
    log: log.child({ component: 'signals' }),
  });
  metrics.watchOutbox(outbox);
  const providers = new TenantProviders(
    (tenant, basePath, secrets, vocabulary) =>
      createTenantProvider({
        config,
        secrets,
        store,
        sealer,
        policy,
        vocabulary,
        log,
        tenant,
        basePath,
        userLoggedOut: (loggedOutOf, sub) => transmitter.emit(loggedOutOf, [userLogout(sub)]),
        logoutRetries: outbox,
      }),
    storedTenantKeys(store, sealer),
    () => policy.vocabulary(),
    config.tenantCacheMax,
    { idleMs: config.tenantIdleSeconds * 1000 },
  );
  // Back-channel logout tokens not delivered at once: signed afresh and posted again from the outbox.
  outbox.handle(
    BACKCHANNEL_LOGOUT_TOPIC,
    deliverKeptLogout((tenant) => providers.providerFor(tenant)),
    {
      maxAgeMs: config.backchannelLogoutRetryMaxSeconds * 1000,
      tenantOf: (payload) => (payload as { tenant?: string }).tenant,
    },
  );
  // A tenant's signing keys rotated by `arbiter rotate-signing-key` (or seen by another node): its providers are built again with them.
  const stopWatchingKeys = watchSigningKeyRotations(
    store,
    config.signingKeyRefreshSeconds * 1000,
    async () => {
      const tenants = await providers.refresh();
      if (tenants.length) log.info({ tenants }, "signing keys rotated: those tenants' providers rebuilt");
    },
    (error) => log.warn({ err: error }, 'signing keys could not be read; keeping the current ones'),
  );
  const audit = new AuditLog(store, log, {
    refusals: {
      perWindow: config.auditUnauthenticatedLimit,
      totalPerWindow: config.auditUnauthenticatedTotalLimit,
      windowSeconds: config.auditAggregateWindowSeconds,
    },
    retentionDays: config.auditRetentionDays,
    allowed: {
      counted: config.auditAllowedCounted,
      unrecorded: config.auditAllowedUnrecorded,
      windowSeconds: config.auditAggregateWindowSeconds,
    },
  });
  // Impact analysis and shadow policies; every recorded live decision is also the shadow's to evaluate.
  const lab = new PolicyLab({
    config,
    store,
    log,
    requestsInFlight: () => inFlight.requests,
    onShadowEvaluated: (point, kind) => metrics.shadowEvaluation(point, kind),
    onShadowDropped: (count) => metrics.shadowDrop(count),
  });
  audit.onWritten((entries) => lab.shadow.observe(() => entries.flatMap(decisionsOfEntry)));
  // Events from policy: the live tokens decided again once the revision in force moves on.
  const policySignals = new PolicyChangeSignals({
    store,
    outbox,
    transmitter,
    lab,
    decisions: (query) => audit.recordedDecisions({ ...query, point: 'introspect' }),
    log: log.child({ component: 'signals' }),
    configuredTenants: config.tenants,
    recheckMax: config.signalsPolicyRecheckMax,
    tokenLifetimeSeconds: config.ttl.accessTokenSeconds,
    pollMs: config.outboxPollMs,
    issuer: config.issuer,
  });
  const clock = new ClockSkew(store, config.clockSkewLimitSeconds * 1000, log.child({ component: 'clock' }));
  clock.start(config.clockCheckIntervalSeconds * 1000);
  metrics.watchClock(clock);
  const koa = createApp({
    config,
    store,
    sealer,
    policy,
    lab,
    audit,
    providers,
    log,
    metrics,
    tracing,
    workers: worker && (() => worker.report()),
    clock,
    signals: { transmitter, outbox, policy: policySignals },
  });
  const callback = koa.callback();
  // Koa answers a failed request itself (ctx.onerror): the promise it returns never rejects.
  handle = (request, response) => void callback(request, response);
  appReady(handle);
  outbox.start();
  policySignals.start();
  const purge = setInterval(housekeeping(store, audit, config, log), config.purgeIntervalSeconds * 1000);
  purge.unref();
  return {
    url,
    adminUrl,
    listening: { public: describeBound(bound, scheme), admin: adminBound ? describeBound(adminBound) : null },
    server,
    store,
    /**
     * Stops accepting connections, lets the requests in flight finish (their audit entries are
     * written before their answers go out) for up to SHUTDOWN_GRACE_MS, then closes whatever is
     * left (OPA's held long polls among it), writes the audit entries still queued (of requests
     * cut off by the grace period), and closes the policy engine and the store.
     */
    async close() {
      clearInterval(purge);
      clock.stop();
      stopWatchingKeys();
      providers.close();
      const closed = Promise.all(servers.map((each) => new Promise<void>((resolve) => each.close(() => resolve()))));
      for (const each of servers) each.closeIdleConnections();
      await inFlight.drained(SHUTDOWN_GRACE_MS);
      await policySignals.close();
      await outbox.close();
      for (const each of servers) each.closeAllConnections();
      await closed;
      await audit.close();
      await lab.shadow.close();
      await policy.close();
      await store.close();
      // Last: the spans of the requests just finished are still to be sent.
      await tracing?.close();
    },
  };
}

/**
 * Node's own limits on a request's arrival: its headers within HTTP_HEADERS_TIMEOUT_MS, the whole
 * request (body included, however slowly it trickles) within HTTP_REQUEST_TIMEOUT_MS, else Node
 * answers 408 and closes the connection, so a slow sender holds a connection (and a body reader)
 * for seconds, not Node's default 300 s. Node checks them on a timer, which must tick well within them.
 */
function httpLimits(config: Config) {
  const { httpRequestTimeoutMs: requestTimeout, httpHeadersTimeoutMs: headersTimeout } = config;
  return {
    requestTimeout,
    headersTimeout,
    connectionsCheckingInterval: Math.min(1_000, Math.ceil(headersTimeout / 2)),
  };
}

const DAY_MS = 86_400_000;

/**
 * Each call purges the expired records, then the audit entries older than AUDIT_RETENTION_DAYS
 * (0 keeps them all), then the oldest beyond AUDIT_RETENTION_MAX_MB (0: no bound). All go in paced steps (src/store/paced.ts), so a large backlog may outlast
 * PURGE_INTERVAL_SECONDS: one run at a time, a call meanwhile does nothing.
 */
function housekeeping(
  store: Store,
  audit: AuditLog,
  { auditRetentionDays: retentionDays, auditRetentionMaxMb: maxMb }: Config,
  log: Logger,
): () => void {
  let running = false;
  const run = async () => {
    await store.purgeExpired().catch((error: unknown) => log.warn({ err: error }, 'purge failed'));
    if (retentionDays > 0)
      await audit.purgeOlderThan(new Date(Date.now() - retentionDays * DAY_MS)).then(
        (removed) => removed > 0 && log.info({ removed, retentionDays }, 'audit entries past their retention deleted'),
        (error: unknown) => log.warn({ err: error }, 'audit retention purge failed'),
      );
    if (maxMb > 0)
      await audit.purgeBeyondSize(maxMb * 1024 * 1024).then(
        (removed) => removed > 0 && log.info({ removed, maxMb }, 'oldest audit entries beyond the size bound deleted'),
        (error: unknown) => log.warn({ err: error }, 'audit size purge failed'),
      );
  };
  return () => {
    if (running) return;
    running = true;
    void run().finally(() => (running = false));
  };
}

/** How long a stopping server waits for the requests in flight. */
const SHUTDOWN_GRACE_MS = 10_000;

/** The requests being answered, except OPA's bundle polls, which a long poll holds for up to 30 s on purpose. */
class InFlight {
  private count = 0;
  private waiters: (() => void)[] = [];

  /** How many are being answered now (a replay paces itself while there are any). */
  get requests(): number {
    return this.count;
  }

  track(request: IncomingMessage, response: ServerResponse, handle: Handler): void {
    if (!request.url?.startsWith(BUNDLE_PATH)) {
      this.count += 1;
      response.once('close', () => {
        this.count -= 1;
        if (this.count === 0) this.waiters.splice(0).forEach((wake) => wake());
      });
    }
    handle(request, response);
  }

  async drained(timeoutMs: number): Promise<void> {
    if (this.count === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.waiters.push(resolve)),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }
}

/**
 * How long a request a worker was handed before its app is built waits for it: a worker's start
 * after it listens takes about a second, several on a loaded machine.
 */
const STARTING_WAIT_MS = 10_000;

/**
 * Answers requests that arrive before the app is built: 503, but for OPA's first bundle poll,
 * which waits for the app instead (OPA starts before it, and would log a failed bundle load).
 * A worker's requests wait too, up to STARTING_WAIT_MS: the primary hands a worker connections
 * once it listens, and a connection it handed to this one cannot go to another that is up (found
 * 2026-11-29: a standby taking a dead worker's place answered new connections 503 meanwhile).
 */
function starting(request: IncomingMessage, response: ServerResponse, app: Promise<Handler>, wait: boolean): void {
  if (request.url?.startsWith(BUNDLE_PATH)) {
    void app.then((handle) => handle(request, response));
    return;
  }
  if (!wait) return answerStarting(response);
  let timer: NodeJS.Timeout | undefined;
  void Promise.race([
    app,
    new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), STARTING_WAIT_MS))),
  ]).then((handle) => {
    clearTimeout(timer);
    if (handle) handle(request, response);
    else answerStarting(response);
  });
}

function answerStarting(response: ServerResponse): void {
  response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
  response.end(JSON.stringify({ error: 'temporarily_unavailable', error_description: 'the server is starting' }));
}

/** Listens on `host` (every interface when null, as Node does by default); resolves with the address really bound. */
function listen(server: Server, port: number, host: string | null): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, ...(host === null ? {} : { host }) }, () => resolve(server.address() as AddressInfo));
  });
}
