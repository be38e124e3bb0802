/**
 * GET /metrics in Prometheus' text format (prom-client): requests by endpoint and status with
 * latency, policy decisions by point and outcome with their engine latency, the policy revision
 * OPA serves against the store's, and the store's latency. One registry per server, so that
 * several servers in one process (the tests) keep apart.
 */
import type { Context, Next, ParameterizedContext } from 'koa';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { nameCredential } from '../http/auth-failures.js';
import { bearerMatches, invalidToken } from '../http/bearer.js';
import { DependencyUnavailableError, HttpError, unsupportedMethod } from '../http/errors.js';
import type { RequestState } from '../http/state.js';
import type { AuditState } from '../audit/index.js';
import type { DecisionInput, DecisionOutcome, DecisionPoint, PolicyEngine } from '../policy/index.js';
import type { ClockSkew, Store } from '../store/index.js';

/** What the metrics read of a request's state: its refusal's code and its audit entry's outcome. */
type MeteredContext = ParameterizedContext<RequestState & AuditState>;

export const METRICS_PATH = '/metrics';

/** Whom wrong METRICS_TOKENs count against in the failure limiter. */
const METRICS_TOKEN_IDENTITY = 'metrics-token';
/** When a scraper refused for want of the workers' metrics is asked to try again. */
const METRICS_RETRY_AFTER_SECONDS = 5;

/** RFC 6750 §3: a challenge without an error code when no token came, invalid_token for a wrong one. */
function metricsTokenRequired(ctx: Context): HttpError {
  const description = 'GET /metrics requires Authorization: Bearer <METRICS_TOKEN>';
  if (ctx.get('authorization') === '') {
    ctx.set('WWW-Authenticate', 'Bearer');
    return new HttpError(401, 'invalid_token', description);
  }
  return invalidToken(ctx, description);
}

/**
 * Endpoint labels come from this list, never from the raw path: a label per path an attacker
 * makes up would grow memory without bound. Longest prefix first.
 */
const ENDPOINTS = [
  '/access/v1/evaluations',
  '/access/v1/evaluation',
  '/access/v1/search',
  '/resource_registration',
  '/policy/bundle.tar.gz',
  '/.well-known',
  '/admin/api',
  '/interaction',
  '/idp/ssf-events',
  '/introspect',
  '/delegation',
  '/permission',
  '/authorize',
  '/userinfo',
  '/par',
  '/register',
  '/healthz',
  '/readyz',
  '/livez',
  '/metrics',
  '/revoke',
  '/token',
];

export function endpointLabel(path: string): string {
  return ENDPOINTS.find((prefix) => path === prefix || path.startsWith(`${prefix}/`)) ?? 'other';
}

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** What the outbox's gauges show, read from the store at a scrape. */
interface OutboxFigures {
  pending: number;
  lagSeconds: number;
  failing: number;
  givenUp: number;
}

/** The gauges of one scrape share one read of the store (they are collected one after another). */
const SCRAPE_READ_REUSE_MS = 1000;

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Histogram({
    name: 'arbiter_http_request_duration_seconds',
    help: 'HTTP requests by endpoint, method and status',
    labelNames: ['endpoint', 'method', 'status'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  private readonly decisions = new Histogram({
    name: 'arbiter_policy_decision_duration_seconds',
    help: 'Policy decisions by point and outcome (allow, deny, error), engine time included',
    labelNames: ['point', 'outcome'],
    buckets: SECONDS,
    registers: [this.registry],
  });
  private readonly decided = new Counter({
    name: 'arbiter_policy_decisions_total',
    help: 'Policy decisions by point, outcome and where Rego was evaluated (in-process, opa; a batch counts each of its decisions)',
    labelNames: ['point', 'outcome', 'rego'],
    registers: [this.registry],
  });

  private readonly tokensIssued = new Counter({
    name: 'arbiter_tokens_issued_total',
    help: 'Successful token responses (/token answered 200) by grant type',
    labelNames: ['grant_type'],
    registers: [this.registry],
  });
  private readonly signIns = new Counter({
    name: 'arbiter_sign_ins_total',
    help: 'Sign-ins at the upstream identity provider by outcome, counted where the authorization request resumes (success, deny, error)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  private readonly throttled = new Counter({
    name: 'arbiter_throttled_requests_total',
    help: 'Requests answered 429 (the authentication failure limit, the audit budget) by endpoint',
    labelNames: ['endpoint'],
    registers: [this.registry],
  });

  private readonly signalsReceived = new Counter({
    name: 'arbiter_ssf_received_events_total',
    help: "Security events pushed by identity providers' transmitters, by event (session-revoked, account-disabled, …, other; none: the push was refused) and outcome (revoked, acknowledged, ignored, or the RFC 8935 error)",
    labelNames: ['event', 'outcome'],
    registers: [this.registry],
  });

  private readonly shadowDifferences = new Counter({
    name: 'arbiter_policy_shadow_differences_total',
    help: 'Live decisions the shadow policy decided otherwise, by point and kind (allow_to_deny, deny_to_allow, narrower, wider, other)',
    labelNames: ['point', 'kind'],
    registers: [this.registry],
  });
  private readonly shadowEvaluated = new Counter({
    name: 'arbiter_policy_shadow_decisions_total',
    help: 'Live decisions also evaluated against the shadow policy, by point',
    labelNames: ['point'],
    registers: [this.registry],
  });
  private readonly shadowDropped = new Counter({
    name: 'arbiter_policy_shadow_dropped_total',
    help: 'Live decisions not evaluated against the shadow policy: more were waiting than POLICY_SHADOW_QUEUE',
    registers: [this.registry],
  });

  /**
   * `exposition`: what GET /metrics answers instead of this registry alone. A worker process
   * (src/workers) answers the sum over every worker of the machine, which its primary gathers.
   */
  constructor(
    store: Store,
    policy: () => PolicyEngine | undefined,
    private readonly exposition?: () => Promise<string>,
  ) {
    collectDefaultMetrics({ register: this.registry, prefix: 'arbiter_' });
    // prom-client's three `*_total` gauges break the exposition format's rule (only counters end in
    // _total; `promtool check metrics` fails): their by-type gauges stay, and sum() over them is the total.
    for (const name of ['handles', 'requests', 'resources'])
      this.registry.removeSingleMetric(`arbiter_nodejs_active_${name}_total`);
    const registry = this.registry;
    new Gauge({
      name: 'arbiter_policy_revision_in_force',
      help: '1 when OPA serves the bundle revision the store holds, else 0; the revisions are labels',
      labelNames: ['store', 'opa'],
      registers: [registry],
      // Summed over workers it would count them; the machine is in force when every worker is.
      aggregator: 'min',
      async collect() {
        this.reset();
        const revisions = await policy()
          ?.revisions()
          .catch(() => null);
        if (revisions)
          this.set(
            { store: shortRevision(revisions.store), opa: revisions.opa ? shortRevision(revisions.opa) : 'none' },
            revisions.store === revisions.opa ? 1 : 0,
          );
      },
    });
    new Gauge({
      name: 'arbiter_store_ping_seconds',
      help: 'How long the store took to answer a ping at scrape time (-1: it did not)',
      registers: [registry],
      aggregator: 'max',
      async collect() {
        const started = process.hrtime.bigint();
        const up = await store.ping().then(
          () => true,
          () => false,
        );
        this.set(up ? Number(process.hrtime.bigint() - started) / 1e9 : -1);
      },
    });
    if (store.connections) {
      const connections = () => store.connections!();
      new Gauge({
        name: 'arbiter_store_pool_connections',
        help: "Connections of the store's pool (PostgreSQL) by state: open (idle or busy), idle, and the pool's size (max)",
        labelNames: ['state'],
        registers: [registry],
        collect() {
          const { open, idle, max } = connections();
          this.set({ state: 'open' }, open);
          this.set({ state: 'idle' }, idle);
          this.set({ state: 'max' }, max);
        },
      });
      new Gauge({
        name: 'arbiter_store_pool_waiting',
        help: "Statements waiting for a connection of the store's pool: above 0 for long, the pool (pool_size) or PostgreSQL is the bottleneck",
        registers: [registry],
        collect() {
          this.set(connections().waiting);
        },
      });
    }
  }

  /**
   * arbiter_outbox_pending, arbiter_outbox_lag_seconds, arbiter_outbox_failing: the durable outbox's
   * entries not yet delivered (src/outbox), the age of the oldest, those that failed at least once.
   * Read from the store at each scrape: every node of a store shows the same figures.
   */
  watchOutbox(outbox: {
    state(): Promise<OutboxFigures>;
    observe(observer: (counted: { topic: string; outcome: string; reason?: string }) => void): void;
  }): void {
    // One read of the store per scrape for the four gauges. A store that cannot answer shows as -1
    // (as arbiter_store_ping_seconds does) and never fails the scrape: the other series are what an
    // operator needs most then.
    let reading: { at: number; state: Promise<OutboxFigures | null> } | null = null;
    const state = (): Promise<OutboxFigures | null> => {
      if (!reading || Date.now() - reading.at > SCRAPE_READ_REUSE_MS)
        reading = { at: Date.now(), state: outbox.state().catch(() => null) };
      return reading.state;
    };
    const gauge = (
      name: string,
      help: string,
      field: keyof OutboxFigures,
      // The store's figures are the same from every worker; what a process gave up is its own.
      aggregator: 'max' | 'sum' = 'max',
    ) =>
      new Gauge({
        name,
        help: `${help} (-1: the store did not answer)`,
        registers: [this.registry],
        aggregator,
        async collect() {
          this.set((await state())?.[field] ?? -1);
        },
      });
    gauge(
      'arbiter_outbox_pending',
      'Outbox entries (Security Event Tokens, back-channel logout tokens) not yet delivered',
      'pending',
    );
    gauge('arbiter_outbox_lag_seconds', 'Age of the oldest outbox entry not yet delivered (0: none)', 'lagSeconds');
    gauge(
      'arbiter_outbox_failing',
      'Outbox entries whose delivery failed at least once and waits for a retry',
      'failing',
    );
    gauge(
      'arbiter_outbox_given_up',
      "Outbox entries this node gave up (past their topic's maximum age, or of a tenant that is gone), since it started",
      'givenUp',
      'sum',
    );
    // Per topic: a recheck's outcomes are not mixed with SET or logout deliveries.
    const counter = (name: string, help: string, labelNames: string[]) =>
      new Counter({ name, help, labelNames, registers: [this.registry] });
    const delivered = counter('arbiter_outbox_delivered_total', 'Outbox entries this node delivered, by topic', [
      'topic',
    ]);
    const failures = counter(
      'arbiter_outbox_failures_total',
      'Failed outbox delivery attempts of this node, by topic',
      ['topic'],
    );
    const givenUp = counter(
      'arbiter_outbox_given_up_total',
      'Outbox entries this node gave up, by topic and reason (max-age, tenant-gone)',
      ['topic', 'reason'],
    );
    outbox.observe((counted) => {
      if (counted.outcome === 'delivered') delivered.inc({ topic: counted.topic });
      else if (counted.outcome === 'failed') failures.inc({ topic: counted.topic });
      else givenUp.inc({ topic: counted.topic, reason: counted.reason ?? 'unknown' });
    });
  }

  /** arbiter_clock_skew_seconds: this node's clock minus the store server's, as last measured (src/store/clock.ts). */
  watchClock(clock: ClockSkew): void {
    new Gauge({
      name: 'arbiter_clock_skew_seconds',
      help: "This node's clock minus the store server's, as last measured (absent with an embedded store)",
      registers: [this.registry],
      // Every worker of a machine shares its clock: the largest skew is the machine's.
      aggregator: 'max',
      collect() {
        this.reset();
        if (clock.seconds !== null) this.set(clock.seconds);
      },
    });
  }

  /**
   * GET /metrics. With METRICS_TOKEN (`token`) only for `Authorization: Bearer <token>`; a wrong
   * token is a failed credential like any other (src/http/auth-failures.ts), but the scraper's right
   * one is always verified, never locked out (a lockout would blind the monitoring). Mount below the
   * failure limiter and the JSON error handler.
   */
  endpoint(token: string | null) {
    return async (ctx: Context): Promise<void> => {
      if (ctx.method !== 'GET') {
        ctx.set('Allow', 'GET');
        throw unsupportedMethod();
      }
      if (token !== null) {
        nameCredential(ctx, METRICS_TOKEN_IDENTITY);
        if (!bearerMatches(ctx.get('authorization'), token)) throw metricsTokenRequired(ctx);
      }
      ctx.body = await this.text();
      ctx.type = this.registry.contentType;
    };
  }

  /**
   * The exposition text. A primary that cannot gather its workers' metrics (busy or blocked past
   * the worker's wait) is a dependency that cannot answer: 503 with the reason logged, not a 500
   * (found 2026-11-30).
   */
  private async text(): Promise<string> {
    if (!this.exposition) return this.registry.metrics();
    try {
      return await this.exposition();
    } catch (error) {
      throw new DependencyUnavailableError(
        'primary',
        "the workers' metrics cannot be gathered now: retry later",
        (error as Error).message,
        METRICS_RETRY_AFTER_SECONDS,
      );
    }
  }

  /** Times every request (GET /metrics too) and counts the business events. */
  middleware() {
    const metered = async (ctx: MeteredContext, next: Next): Promise<void> => {
      const endpoint = endpointLabel(ctx.path);
      const stop = this.requests.startTimer({ endpoint, method: methodLabel(ctx.method) });
      try {
        await next();
      } finally {
        // Measured once the answer is decided (errors included: the JSON error handler sits below).
        stop({ status: String(ctx.status) });
        this.count(ctx, endpoint);
      }
    };
    return metered;
  }

  /** The business counters: tokens issued, sign-in outcomes, throttled requests. */
  private count(ctx: MeteredContext, endpoint: string): void {
    if (ctx.status === 429) this.throttled.inc({ endpoint });
    if (endpoint === '/token' && ctx.status === 200) {
      const grantType = (ctx as { oidc?: { params?: { grant_type?: unknown } } }).oidc?.params?.grant_type;
      this.tokensIssued.inc({ grant_type: GRANT_TYPES.has(grantType as string) ? (grantType as string) : 'other' });
    }
    // The resumption of an authorization request after the sign-in (/authorize/:uid); a refused or
    // failed sign-in leaves its error on the request's state (oauth/interactions/audit.ts).
    if (endpoint === '/authorize' && ctx.path.startsWith('/authorize/') && ctx.method === 'GET') {
      const { errorCode, audit } = ctx.state;
      this.signIns.inc({ outcome: errorCode ? (audit?.outcome ?? 'deny') : 'success' });
    }
  }

  /** A live decision evaluated against the shadow policy, and how the shadow decided otherwise (null: it did not). */
  shadowEvaluation(point: string, kind: string | null): void {
    this.shadowEvaluated.inc({ point });
    if (kind) this.shadowDifferences.inc({ point, kind });
  }

  /** A pushed security event and what became of it (src/signals/receiver: both labels from fixed lists). */
  signalReceived(event: string, outcome: string): void {
    this.signalsReceived.inc({ event, outcome });
  }

  /** Live decisions dropped before the shadow evaluation (its queue was full). */
  shadowDrop(count: number): void {
    this.shadowDropped.inc(count);
  }

  /** The engine, with every decision counted and timed by point and outcome. */
  observed(engine: PolicyEngine): PolicyEngine {
    const outcomeOf = (outcome: DecisionOutcome) =>
      outcome.engineError ? 'error' : outcome.decision.allow ? 'allow' : 'deny';
    /** Each distinct label set once, with its count: a batch of 100 is a few increments, not 100. */
    const record = (point: DecisionPoint, outcomes: DecisionOutcome[], secondsEach: number) => {
      const counted = new Map<string, { outcome: string; rego: string; count: number }>();
      for (const outcome of outcomes) {
        const labels = { outcome: outcomeOf(outcome), rego: outcome.engines?.regoEvaluator ?? 'none' };
        const key = `${labels.outcome} ${labels.rego}`;
        const seen = counted.get(key);
        if (seen) seen.count += 1;
        else counted.set(key, { ...labels, count: 1 });
      }
      for (const { outcome, rego, count } of counted.values()) {
        this.decided.inc({ point, outcome, rego }, count);
        for (let index = 0; index < count; index += 1) this.decisions.observe({ point, outcome }, secondsEach);
      }
    };
    return Object.assign(Object.create(engine) as PolicyEngine, {
      async decide(point: DecisionPoint, input: DecisionInput) {
        const started = process.hrtime.bigint();
        const outcome = await engine.decide(point, input);
        record(point, [outcome], Number(process.hrtime.bigint() - started) / 1e9);
        return outcome;
      },
      async decideAll(point: DecisionPoint, inputs: DecisionInput[]) {
        const started = process.hrtime.bigint();
        const outcomes = await engine.decideAll(point, inputs);
        const each = Number(process.hrtime.bigint() - started) / 1e9 / Math.max(outcomes.length, 1);
        record(point, outcomes, each);
        return outcomes;
      },
    });
  }
}

/** Grant types a label may name; a 200 answers only registered ones, this bounds the label anyway. */
const GRANT_TYPES = new Set([
  'authorization_code',
  'refresh_token',
  'client_credentials',
  'urn:ietf:params:oauth:grant-type:token-exchange',
  'urn:ietf:params:oauth:grant-type:uma-ticket',
  'urn:ietf:params:oauth:grant-type:device_code',
]);

/** A bundle revision as a label: its first 12 hex digits, as git shortens a commit. */
function shortRevision(revision: string): string {
  return revision.slice(0, 12);
}

function methodLabel(method: string): string {
  return ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'].includes(method) ? method : 'other';
}
