import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import Koa from 'koa';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { createOutbound } from '../../src/http/outbound.js';
import { createLogger } from '../../src/log/index.js';
import { isTraced, startTracing } from '../../src/tracing/index.js';
import { basic, clientCredentials, confidentialClient, eventually, policyInForce } from '../support/oauth.js';
import { readyServer, withServer, type TestServer } from '../support/server.js';

/** A span as an OTLP/HTTP JSON export carries it, with its attributes as plain values. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  status?: { code?: number; message?: string };
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

interface OtlpAttribute {
  key: string;
  value: Record<string, unknown>;
}

/** A stand-in OpenTelemetry collector: answers OTLP/HTTP JSON exports on /v1/traces and keeps what came. */
class OtlpReceiver {
  readonly bodies: string[] = [];
  readonly spans: ReceivedSpan[] = [];
  private readonly server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (request.method === 'POST' && request.url === '/v1/traces') {
        expect(request.headers['content-type']).to.match(/^application\/json/);
        this.bodies.push(body);
        this.spans.push(...spansOf(JSON.parse(body)));
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  of(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function spansOf(request: any): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((resourceSpans: any) =>
    (resourceSpans.scopeSpans ?? []).flatMap((scope: any) =>
      (scope.spans ?? []).map((span: any) => ({
        ...span,
        attributes: plain(span.attributes),
        resource: plain(resourceSpans.resource?.attributes),
      })),
    ),
  );
}

function plain(attributes: OtlpAttribute[] = []): Record<string, unknown> {
  return Object.fromEntries(
    attributes.map(({ key, value }) => {
      const [kind, given] = Object.entries(value)[0]!;
      return [key, kind === 'intValue' ? Number(given) : given];
    }),
  );
}

/** A W3C traceparent (version 00) of a fresh trace: sampled unless said otherwise. */
function traceparent(sampled = true) {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, header: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` };
}

const SERVER_KIND = 2;
const ERROR_STATUS = 2;

/** OpenTelemetry traces through real HTTP to a test OTLP receiver: spans, their parents, what they carry and do not. */
describe('tracing', function () {
  let receiver: OtlpReceiver;
  let server: TestServer;
  let secret: string;

  before(async function () {
    receiver = new OtlpReceiver();
    const collector = await receiver.start();
    // A server of its own: its environment points it at this file's receiver, with a short export delay.
    server = await readyServer({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_SERVICE_NAME: 'arbiter-under-test',
    });
    await policyInForce(server);
    secret = await confidentialClient(server, 'traced-service', { scopes: ['read'] });
  });

  after(async function () {
    await server?.close();
    await receiver?.close();
  });

  /** The spans of a trace once its server span (ended last, exported last) has arrived. */
  const traceOf = async (traceId: string) => {
    await eventually(async () => receiver.of(traceId).some((span) => span.kind === SERVER_KIND));
    return receiver.of(traceId);
  };

  it('continues the caller’s traceparent: a server span, its policy decision and store calls as children', async function () {
    const caller = traceparent();
    const answer = await clientCredentials(
      server,
      'traced-service',
      secret,
      { scope: 'read' },
      { traceparent: caller.header, 'X-Request-ID': 'trace-me-1' },
    );
    expect(answer.status).to.equal(200);
    const spans = await traceOf(caller.traceId);
    const request = spans.find((span) => span.kind === SERVER_KIND)!;
    expect(request.parentSpanId, "the caller's span is the parent").to.equal(caller.spanId);
    expect(request.name).to.equal('POST /token');
    expect(request.attributes).to.include({
      'http.request.method': 'POST',
      'url.path': '/token',
      'http.response.status_code': 200,
      'arbiter.request_id': 'trace-me-1',
      'arbiter.tenant': '_default',
    });
    expect(request.resource['service.name']).to.equal('arbiter-under-test');

    const decision = spans.find((span) => span.name === 'policy token');
    expect(decision, 'a span for the token decision').to.not.equal(undefined);
    expect(decision!.parentSpanId).to.equal(request.spanId);
    expect(decision!.attributes).to.include({ 'arbiter.policy.point': 'token', 'arbiter.policy.outcome': 'allow' });
    expect(decision!.attributes['arbiter.policy.rego']).to.equal('allow');

    const storeCalls = spans.filter((span) => span.attributes['db.system.name'] === 'sqlite');
    expect(storeCalls.length, 'store calls have spans').to.be.greaterThan(0);
    const ids = new Set(spans.map((span) => span.spanId));
    for (const call of storeCalls) {
      expect(ids.has(call.parentSpanId!), `${call.name} is a child of a span of the request`).to.equal(true);
      expect(call.name).to.equal(`${call.attributes['db.operation.name']} ${call.attributes['db.collection.name']}`);
    }
    expect(storeCalls.some((call) => call.attributes['db.collection.name'] === 'clients')).to.equal(true);
  });

  it('answers with the traceparent of its server span: the caller’s trace, or one of its own', async function () {
    const caller = traceparent();
    const answer = await server.request('/.well-known/openid-configuration', {
      headers: { traceparent: caller.header },
    });
    const header = answer.headers.get('traceparent');
    expect(header).to.match(new RegExp(`^00-${caller.traceId}-[0-9a-f]{16}-01$`));
    const spans = await traceOf(caller.traceId);
    const request = spans.find((span) => span.kind === SERVER_KIND)!;
    expect(header!.split('-')[2], 'the server span').to.equal(request.spanId);
    const own = await server.request('/.well-known/openid-configuration');
    expect(own.headers.get('traceparent')).to.match(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    expect(own.headers.get('traceparent')!.split('-')[1]).to.not.equal(caller.traceId);
  });

  it('puts no secret in any span: no client secret, credential, token, header or query', async function () {
    const caller = traceparent();
    const answer = await clientCredentials(
      server,
      'traced-service',
      secret,
      { scope: 'read' },
      { traceparent: caller.header },
    );
    expect(answer.status).to.equal(200);
    const query = traceparent();
    const refused = await server.request('/authorize?client_id=traced-service&state=query-state-never-traced', {
      headers: { traceparent: query.header },
    });
    expect(refused.status).to.be.within(300, 499);
    await traceOf(caller.traceId);
    const authorize = (await traceOf(query.traceId)).filter((span) => span.kind === SERVER_KIND)[0]!;
    expect(authorize.attributes['url.path']).to.equal('/authorize');
    const everything = receiver.bodies.join('\n');
    for (const secretValue of [
      secret,
      basic('traced-service', secret).slice('Basic '.length),
      answer.body.access_token,
      'query-state-never-traced',
    ])
      expect(everything).not.to.contain(secretValue);
    expect(everything.toLowerCase()).not.to.contain('authorization');
  });

  it('marks a refused request by its status, not as a server error', async function () {
    const caller = traceparent();
    const refused = await clientCredentials(
      server,
      'traced-service',
      'a wrong secret',
      {},
      { traceparent: caller.header },
    );
    expect(refused.status).to.equal(401);
    const request = (await traceOf(caller.traceId)).filter((span) => span.kind === SERVER_KIND)[0]!;
    expect(request.attributes['http.response.status_code']).to.equal(401);
    expect(request.status?.code ?? 0, 'a 4xx is not a server error').to.not.equal(ERROR_STATUS);
  });

  it('keeps the caller’s decision not to sample, and makes no span for probes', async function () {
    const unsampled = traceparent(false);
    expect(
      (await clientCredentials(server, 'traced-service', secret, {}, { traceparent: unsampled.header })).status,
    ).to.equal(200);
    const probe = traceparent();
    expect((await server.request('/healthz', { headers: { traceparent: probe.header } })).status).to.equal(200);
    // Spans are exported in the order they end: once a later request's trace is in, those two would be too.
    const later = traceparent();
    await clientCredentials(server, 'traced-service', secret, {}, { traceparent: later.header });
    await traceOf(later.traceId);
    expect(receiver.of(unsampled.traceId)).to.deep.equal([]);
    expect(receiver.of(probe.traceId)).to.deep.equal([]);
  });

  it('starts a trace of its own for a request without traceparent, and ignores a malformed one', async function () {
    const before = receiver.spans.length;
    const malformed = await server.request('/.well-known/openid-configuration', {
      headers: { traceparent: '00-not-a-trace-01', 'X-Request-ID': 'malformed-traceparent' },
    });
    expect(malformed.status).to.equal(200);
    await eventually(async () =>
      receiver.spans.slice(before).some((span) => span.attributes['arbiter.request_id'] === 'malformed-traceparent'),
    );
    const span = receiver.spans.find((each) => each.attributes['arbiter.request_id'] === 'malformed-traceparent')!;
    expect(span.parentSpanId ?? '', 'a root span').to.equal('');
    expect(span.traceId).to.match(/^[0-9a-f]{32}$/);
    expect(span.name).to.equal('GET /.well-known');
  });

  it('keeps at most 1024 characters of a long path', async function () {
    const caller = traceparent();
    const path = `/made-up/${'a'.repeat(3000)}`;
    expect((await server.request(path, { headers: { traceparent: caller.header } })).status).to.equal(404);
    const request = (await traceOf(caller.traceId))[0]!;
    expect(request.name, 'an unknown endpoint is named by its method').to.equal('GET');
    expect(request.attributes['arbiter.endpoint']).to.equal('other');
    expect(request.attributes['url.path']).to.equal(path.slice(0, 1024));
  });

  it('wraps the store of a traced server only: a server without an OTLP endpoint runs as it did', async function () {
    expect(isTraced(server.store)).to.equal(true);
    const untraced = await withServer();
    expect(isTraced(untraced.store), 'no wrapper without an endpoint').to.equal(false);
    expect(untraced.config.otlpTracesEndpoint).to.equal(null);
  });
});

describe('tracing with a sample ratio', function () {
  let receiver: OtlpReceiver;
  let server: TestServer;

  before(async function () {
    receiver = new OtlpReceiver();
    // A server of its own: it samples none of the traces it would start itself.
    server = await readyServer({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${await receiver.start()}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_TRACES_SAMPLER_ARG: '0',
    });
  });

  after(async function () {
    await server?.close();
    await receiver?.close();
  });

  it('samples the traces it starts at OTEL_TRACES_SAMPLER_ARG, and a caller’s sampled trace always', async function () {
    const own = await server.request('/.well-known/openid-configuration', { headers: { 'X-Request-ID': 'own-trace' } });
    expect(own.status).to.equal(200);
    const caller = traceparent();
    await server.request('/.well-known/openid-configuration', { headers: { traceparent: caller.header } });
    await eventually(async () => receiver.of(caller.traceId).length > 0);
    expect(receiver.spans.filter((span) => span.attributes['arbiter.request_id'] === 'own-trace')).to.deep.equal([]);
  });
});

describe('tracing across outbound calls', function () {
  it('carries the request’s trace on its outbound calls (upstream IdP, JWKS, CIMD: one module), none outside a request', async function () {
    const seen: (string | undefined)[] = [];
    const listener = createServer((request, response) => {
      seen.push(request.headers.traceparent as string | undefined);
      response.setHeader('content-type', 'application/json');
      response.end('{}');
    });
    listener.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    const target = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/jwks`;
    const tracing = startTracing(
      {
        otlpTracesEndpoint: 'http://127.0.0.1:9/v1/traces',
        serviceName: 'outbound-test',
        tracingExportDelayMs: 60_000,
        tracingSampleRatio: 1,
      },
      createLogger('silent'),
    )!;
    const outbound = createOutbound({ allowInsecureLoopback: true, timeoutMs: 5_000, maxResponseBytes: 10_000 });
    const app = new Koa();
    app.use(tracing.middleware([]));
    app.use(async (ctx) => {
      await outbound.getJson(target);
      ctx.body = 'ok';
    });
    const http = app.listen(0, '127.0.0.1');
    await once(http, 'listening');
    try {
      const caller = traceparent();
      const answer = await fetch(`http://127.0.0.1:${(http.address() as AddressInfo).port}/sign-in`, {
        headers: { traceparent: caller.header },
      });
      expect(answer.status).to.equal(200);
      expect(seen[0]).to.match(new RegExp(`^00-${caller.traceId}-[0-9a-f]{16}-01$`));
      expect(seen[0]!.split('-')[2], 'the server span is the parent').to.equal(
        answer.headers.get('traceparent')!.split('-')[2],
      );
      await outbound.getJson(target);
      expect(seen[1], 'no request, no trace').to.equal(undefined);
    } finally {
      http.close();
      listener.close();
      await tracing.close();
    }
  });
});

/** `start` run with the OTLP exporter's own timeout setting in the environment, which is then restored. */
async function withExporterTimeout<T>(timeoutMs: string, start: () => Promise<T>): Promise<T> {
  const before = process.env.OTEL_EXPORTER_OTLP_TIMEOUT;
  process.env.OTEL_EXPORTER_OTLP_TIMEOUT = timeoutMs;
  try {
    return await start();
  } finally {
    if (before === undefined) delete process.env.OTEL_EXPORTER_OTLP_TIMEOUT;
    else process.env.OTEL_EXPORTER_OTLP_TIMEOUT = before;
  }
}

describe('tracing to a collector that is down', function () {
  it('answers as usual, logs the failed export, and stops without waiting for the collector', async function () {
    // A port nothing listens on: connections are refused, and the exporter retries until it gives up.
    const closed = new OtlpReceiver();
    const collector = await closed.start();
    await closed.close();
    const lines: string[] = [];
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    // The exporter reads its own OTEL_EXPORTER_OTLP_TIMEOUT (docs/operations.md) when it is made: 1 s
    // instead of its default 10 s of retries before an export counts as failed.
    const server = await withExporterTimeout('1000', () =>
      readyServer(
        { OTEL_EXPORTER_OTLP_ENDPOINT: collector, OTEL_BSP_SCHEDULE_DELAY: '50', LOG_LEVEL: 'warn' },
        { logStream },
      ),
    );
    try {
      expect((await server.request('/.well-known/openid-configuration')).status).to.equal(200);
      await eventually(async () => lines.some((line) => line.includes('spans could not be exported')), 30_000);
      expect((await server.request('/.well-known/openid-configuration')).status).to.equal(200);
    } finally {
      const stopping = Date.now();
      await server.close();
      expect(Date.now() - stopping, 'the last spans are given up after 2 s').to.be.below(5_000);
    }
  });
});

describe('tracing settings', function () {
  it('derives the traces URL from OTEL_EXPORTER_OTLP_ENDPOINT, and takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given', function () {
    expect(loadConfig({}).otlpTracesEndpoint).to.equal(null);
    expect(loadConfig({}).serviceName).to.equal('arbiter');
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).otlpTracesEndpoint).to.equal(
      'http://collector:4318/v1/traces',
    );
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/custom',
      }).otlpTracesEndpoint,
    ).to.equal('https://traces.example/custom');
  });

  it('logs the endpoint without the credentials a collector may take in its URL', async function () {
    const lines: string[] = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(line) });
    const config = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-user:otel-password@127.0.0.1:9' });
    const tracing = startTracing(config, log);
    await tracing?.close();
    const announced = lines.find((line) => line.includes('spans exported by OTLP/HTTP'));
    expect(announced, lines.join('')).to.contain('"endpoint":"http://127.0.0.1:9/v1/traces"');
    expect(lines.join('')).not.to.contain('otel-password');
  });

  it('refuses an endpoint that is no http(s) URL, naming the variable', function () {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' })).to.throw(
      ConfigError,
      /OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/,
    );
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c/v1/traces?key=1' })).to.throw(
      ConfigError,
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/,
    );
    expect(() => loadConfig({ OTEL_BSP_SCHEDULE_DELAY: 'soon' })).to.throw(ConfigError, /OTEL_BSP_SCHEDULE_DELAY/);
    expect(loadConfig({ OTEL_TRACES_SAMPLER_ARG: '0.25' }).tracingSampleRatio).to.equal(0.25);
    expect(loadConfig({}).tracingSampleRatio).to.equal(1);
    expect(() => loadConfig({ OTEL_TRACES_SAMPLER_ARG: 'half' })).to.throw(
      ConfigError,
      /OTEL_TRACES_SAMPLER_ARG must be a number/,
    );
    expect(() => loadConfig({ OTEL_TRACES_SAMPLER_ARG: '1.5' })).to.throw(
      ConfigError,
      /OTEL_TRACES_SAMPLER_ARG must be <= 1/,
    );
  });
});
