/**
 * OpenTelemetry traces, off unless an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT): one server span per HTTP request, a child span per policy
 * decision and per store call, exported in batches as OTLP/HTTP JSON. An incoming W3C
 * `traceparent` is honoured: the server span continues the caller's trace, and its sampling flag;
 * every traced answer carries the server span's own `traceparent`.
 *
 * Nothing here touches OpenTelemetry's process-wide globals (tracer provider, context manager,
 * propagator): each server has its own provider and its own async context, so that several servers
 * in one process (the tests) keep apart, and a server without tracing runs exactly the code it ran
 * before: no SDK, no wrapper, no context switching (startTracing returns null).
 *
 * What spans carry is chosen, never copied wholesale: the path without its query (a query may hold a
 * code or a token), the method, the status, the tenant and the request id; the decision point and its
 * outcome; the collection and operation. Never a header, a body, a parameter or a policy input.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context as OtelContext,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  AlwaysOnSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVICE_NAME,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions';
import type { Context, Next, ParameterizedContext } from 'koa';
import type { Config } from '../config/index.js';
import type { RequestState } from '../http/state.js';
import { outboundTraceHeaders, shownUrl } from '../http/outbound.js';
import type { Logger } from '../log/index.js';
import { endpointLabel } from '../metrics/index.js';
import type { DecisionInput, DecisionOutcome, DecisionPoint, PolicyEngine } from '../policy/index.js';
import type { Store } from '../store/index.js';
import { TRACED, tracedStore } from './store.js';

/** True for a store or policy engine a Tracing wrapped: a server without tracing has none. */
export function isTraced(value: object): boolean {
  return TRACED in value;
}

/** Characters of an attribute's value that are kept (url.path is the caller's). */
const MAX_ATTRIBUTE_LENGTH = 1024;

/** How long a stopping server waits for its last spans to be taken by the collector. */
const CLOSE_TIMEOUT_MS = 2_000;

/** Export failures are logged at most this often: a collector that is down must not flood the log. */
const EXPORT_WARNING_INTERVAL_MS = 60_000;

/** The tracing of one server; null from startTracing when no OTLP endpoint is configured. */
export function startTracing(
  config: Pick<Config, 'otlpTracesEndpoint' | 'serviceName' | 'tracingExportDelayMs' | 'tracingSampleRatio'>,
  log: Logger,
): Tracing | null {
  if (!config.otlpTracesEndpoint) return null;
  const tracing = new Tracing(
    warnOnFailure(new OTLPTraceExporter({ url: config.otlpTracesEndpoint }), log.child({ component: 'tracing' })),
    {
      serviceName: config.serviceName,
      exportDelayMs: config.tracingExportDelayMs,
      sampleRatio: config.tracingSampleRatio,
    },
  );
  log.info(
    // Origin and path: credentials in the URL (user:password@) are the collector's, never the log's.
    {
      endpoint: shownUrl(config.otlpTracesEndpoint),
      serviceName: config.serviceName,
      sampleRatio: config.tracingSampleRatio,
    },
    'tracing: spans exported by OTLP/HTTP',
  );
  return tracing;
}

export class Tracing {
  private readonly provider: TracerProvider;
  private readonly tracer: Tracer;
  /** This server's current span, carried across awaits (AsyncLocalStorage). */
  private readonly contexts = new AsyncLocalStorageContextManager();
  private readonly propagator = new W3CTraceContextPropagator();

  constructor(
    exporter: SpanExporter,
    { serviceName, exportDelayMs, sampleRatio }: { serviceName: string; exportDelayMs: number; sampleRatio: number },
  ) {
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
      // OpenTelemetry's parentbased_traceidratio: a caller's sampling decision (traceparent's flag) is
      // kept; of the traces Arbiter starts itself, OTEL_TRACES_SAMPLER_ARG's share (all by default).
      sampler: new ParentBasedSampler({
        root: sampleRatio >= 1 ? new AlwaysOnSampler() : new TraceIdRatioBasedSampler(sampleRatio),
      }),
      // A caller chooses the path: a long one is cut rather than sent whole with every span.
      spanLimits: { attributeValueLengthLimit: MAX_ATTRIBUTE_LENGTH },
      spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: exportDelayMs })],
    });
    this.tracer = this.provider.getTracer('arbiter');
  }

  /**
   * One server span per request, named `METHOD endpoint` with the endpoint as src/metrics labels it
   * (a bounded set, never the raw path), continuing the caller's `traceparent` when it sends one.
   * Ended when the answer is finished or the connection closed, so that it covers the whole answer.
   * `untraced` paths (probes, OPA's bundle polls, scrapes) make no span: they would bury the traces.
   */
  middleware(untraced: readonly string[]) {
    const skip = new Set(untraced);
    return (ctx: Context, next: Next): Promise<void> => {
      if (skip.has(ctx.path)) return next();
      const parent = this.propagator.extract(ROOT_CONTEXT, ctx.headers, HEADER_GETTER);
      const endpoint = endpointLabel(ctx.path);
      const method = METHODS.has(ctx.method) ? ctx.method : '_OTHER';
      const span = this.tracer.startSpan(
        endpoint === 'other' ? method : `${method} ${endpoint}`,
        {
          kind: SpanKind.SERVER,
          attributes: { [ATTR_HTTP_REQUEST_METHOD]: method, [ATTR_URL_PATH]: ctx.path, 'arbiter.endpoint': endpoint },
        },
        parent,
      );
      ctx.res.once('close', () => endServerSpan(span, ctx));
      const current = trace.setSpan(parent, span);
      // The answer names its trace and server span: whoever reports a problem with it can give them.
      this.propagator.inject(current, ctx, RESPONSE_HEADER_SETTER);
      // The calls the request makes (upstream IdP, JWKS, metadata documents) carry its trace on.
      const outbound = () => this.headersOf(this.contexts.active());
      return this.contexts.with(current, () => outboundTraceHeaders.run(outbound, next));
    };
  }

  /** `traceparent` (and `tracestate`) of a context, as request headers. */
  private headersOf(current: OtelContext): Record<string, string> {
    const headers: Record<string, string> = {};
    this.propagator.inject(current, headers, {
      set: (carrier: Record<string, string>, key: string, value: string) => (carrier[key] = value),
    });
    return headers;
  }

  /** The engine, with a child span per decision (and per batch of decisions): point, outcome, engines. */
  observed(engine: PolicyEngine): PolicyEngine {
    return Object.assign(Object.create(engine) as PolicyEngine, {
      [TRACED]: true,
      decide: (point: DecisionPoint, input: DecisionInput) =>
        this.inSpan(`policy ${point}`, { 'arbiter.policy.point': point }, async (span) => {
          const outcome = await engine.decide(point, input);
          describeDecision(span, outcome);
          return outcome;
        }),
      decideAll: (point: DecisionPoint, inputs: DecisionInput[]) =>
        this.inSpan(
          `policy ${point}`,
          { 'arbiter.policy.point': point, 'arbiter.policy.decisions': inputs.length },
          async (span) => {
            const outcomes = await engine.decideAll(point, inputs);
            describeDecisions(span, outcomes);
            return outcomes;
          },
        ),
    });
  }

  /** The store STORE_URL names, with a child span per call (`find clients`: operation, collection, tenant, database). */
  traced(store: Store, storeUrl: string): Store {
    const system = storeSystem(storeUrl);
    return tracedStore(store, (name, attributes, work) =>
      this.inSpan(name, { 'db.system.name': system, ...attributes }, work),
    );
  }

  /**
   * Exports the spans still queued, then stops (at shutdown). A collector that cannot take them
   * loses them (its failure is logged): a stopping server waits on it CLOSE_TIMEOUT_MS at most,
   * rather than the exporter's retries, and never fails for it.
   */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.provider.shutdown().catch(() => undefined),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_TIMEOUT_MS))),
    ]);
    clearTimeout(timer);
  }

  /**
   * `work` inside a child span of the current one, ended when it settles. Outside any traced
   * request (start-up, background purges) or in a trace the caller did not sample, `work` just
   * runs: a span without a parent would only be noise, and this keeps the untraced path cheap.
   */
  private inSpan<T>(name: string, attributes: Attributes, work: (span: Span) => Promise<T>): Promise<T> {
    const active = this.contexts.active();
    const parent = trace.getSpan(active);
    if (!parent?.isRecording()) return work(NOT_RECORDED);
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, active);
    return this.contexts.with(trace.setSpan(active, span), async () => {
      try {
        return await work(span);
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorName(error) });
        span.setAttribute(ATTR_ERROR_TYPE, errorName(error));
        throw error;
      } finally {
        span.end();
      }
    });
  }
}

/** The spans' stand-in where none is made: its setters do nothing. */
const NOT_RECORDED = trace.wrapSpanContext({ traceId: '', spanId: '', traceFlags: 0 });

const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH']);

/** Koa's headers are lower-case already; a repeated header's first value counts. */
const HEADER_GETTER = {
  keys: (carrier: Record<string, unknown>) => Object.keys(carrier),
  get: (carrier: Record<string, unknown>, key: string) => {
    const value = carrier[key.toLowerCase()];
    return Array.isArray(value) ? (value[0] as string) : (value as string | undefined);
  },
};

/** `traceparent` (and a caller's `tracestate`) on the answer. */
const RESPONSE_HEADER_SETTER = {
  set: (ctx: ParameterizedContext<RequestState>, key: string, value: string) => ctx.set(key, value),
};

function endServerSpan(span: Span, ctx: ParameterizedContext<RequestState>): void {
  const status = ctx.res.statusCode;
  const { requestId, tenant } = ctx.state;
  span.setAttributes({
    [ATTR_HTTP_RESPONSE_STATUS_CODE]: status,
    ...(requestId ? { 'arbiter.request_id': requestId } : {}),
    ...(tenant?.name ? { 'arbiter.tenant': tenant.name } : {}),
  });
  // A server span is an error for a 5xx only: a 4xx is the caller's mistake, answered as it should be.
  if (status >= 500) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    span.setAttribute(ATTR_ERROR_TYPE, String(status));
  } else if (!ctx.res.writableFinished) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the connection closed before the answer was sent' });
    span.setAttribute(ATTR_ERROR_TYPE, 'connection_closed');
  }
  span.end();
}

function outcomeOf(outcome: DecisionOutcome): 'allow' | 'deny' | 'error' {
  return outcome.engineError ? 'error' : outcome.decision.allow ? 'allow' : 'deny';
}

function describeDecision(span: Span, outcome: DecisionOutcome): void {
  const engines = outcome.engines;
  span.setAttributes({
    'arbiter.policy.outcome': outcomeOf(outcome),
    ...(engines
      ? {
          'arbiter.policy.rego': engines.rego,
          'arbiter.policy.cedar': engines.cedar,
          ...(engines.regoEvaluator ? { 'arbiter.policy.rego_evaluator': engines.regoEvaluator } : {}),
        }
      : {}),
  });
  if (outcome.engineError) span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.engineError });
}

/** A batch: how many decisions had each outcome, and the first engine error. */
function describeDecisions(span: Span, outcomes: DecisionOutcome[]): void {
  const counts = { allow: 0, deny: 0, error: 0 };
  for (const outcome of outcomes) counts[outcomeOf(outcome)] += 1;
  span.setAttributes({
    'arbiter.policy.allowed': counts.allow,
    'arbiter.policy.denied': counts.deny,
    'arbiter.policy.errors': counts.error,
  });
  const failed = outcomes.find((outcome) => outcome.engineError);
  if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: failed.engineError });
}

/** An error's class name only: a message may quote a value (a store error, a record). */
function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** The exporter, logging a failed export (collector down, refused) at most once a minute. */
function warnOnFailure(exporter: SpanExporter, log: Logger): SpanExporter {
  let lastWarning = 0;
  return {
    export(spans, done) {
      exporter.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS && Date.now() - lastWarning > EXPORT_WARNING_INTERVAL_MS) {
          lastWarning = Date.now();
          log.warn(
            { err: result.error, spans: spans.length },
            'tracing: spans could not be exported to the OTLP endpoint',
          );
        }
        done(result);
      });
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

/**
 * OpenTelemetry's `db.system.name` of the store STORE_URL names (found 2026-11-30: PostgreSQL was
 * called mongodb).
 */
export function storeSystem(storeUrl: string): 'sqlite' | 'postgresql' | 'mongodb' {
  if (storeUrl.startsWith('sqlite:')) return 'sqlite';
  return /^postgres(ql)?:/.test(storeUrl) ? 'postgresql' : 'mongodb';
}
