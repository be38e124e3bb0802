import { expect } from 'chai';
import { Writable } from 'node:stream';
import { clientCredentials, confidentialClient, policyInForce } from '../support/oauth.js';
import { rawRequest } from '../support/raw-http.js';
import { inTenant, readyServer, withServer, type TestServer } from '../support/server.js';

/** GET /metrics (Prometheus) and request ids across answer, logs and audit entries. */
describe('observability', function () {
  let server: TestServer;
  let secret: string;

  before(async function () {
    // A tenant of its own on the shared server: its clients, tokens and audit entries are apart from other files'.
    server = inTenant(await withServer(), 'observability');
    await policyInForce(server);
    secret = await confidentialClient(server, 'metered', { scopes: ['read'] });
  });

  const metrics = async () => {
    const response = await server.request('/metrics');
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^text\/plain/);
    return response.text();
  };
  const value = (text: string, series: string) => {
    const line = text.split('\n').find((candidate) => candidate.startsWith(series));
    return line === undefined ? undefined : Number(line.slice(series.length).trim());
  };

  it('counts requests by endpoint and status, and decisions by point and outcome', async function () {
    const before = await metrics();
    const count = (text: string) =>
      value(text, 'arbiter_http_request_duration_seconds_count{endpoint="/token",method="POST",status="200"}') ?? 0;
    const allowed = (text: string) =>
      (value(text, 'arbiter_policy_decisions_total{point="token",outcome="allow",rego="in-process"}') ?? 0) +
      (value(text, 'arbiter_policy_decisions_total{point="token",outcome="allow",rego="opa"}') ?? 0);
    const issued = (text: string) => value(text, 'arbiter_tokens_issued_total{grant_type="client_credentials"}') ?? 0;
    for (let round = 0; round < 3; round += 1) {
      expect((await clientCredentials(server, 'metered', secret, { scope: 'read' })).status).to.equal(200);
    }
    expect((await clientCredentials(server, 'metered', 'a wrong secret', { scope: 'read' })).status).to.equal(401);
    const after = await metrics();
    expect(count(after) - count(before)).to.equal(3);
    expect(issued(after) - issued(before), 'the refused request issued nothing').to.equal(3);
    expect(allowed(after) - allowed(before)).to.equal(3);
    expect(after).to.contain(
      'arbiter_policy_decision_duration_seconds_bucket{le="0.005",point="token",outcome="allow"}',
    );
    expect(value(after, 'arbiter_store_ping_seconds')).to.be.at.least(0);
    expect(after, 'revisions shortened to 12 hex digits').to.match(
      /arbiter_policy_revision_in_force\{store="[0-9a-f]{12}",opa="[0-9a-f]{12}"\} 1/,
    );
    expect(after).to.contain('arbiter_process_cpu_seconds_total');
  });

  it('ends no gauge or histogram name in _total (promtool check metrics): only counters do', async function () {
    const types = [...(await metrics()).matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => ({ name, type }));
    expect(types.length).to.be.above(10);
    expect(types.filter(({ name, type }) => type !== 'counter' && name!.endsWith('_total'))).to.deep.equal([]);
  });

  it('labels made-up paths "other": no label per path a caller invents', async function () {
    for (let index = 0; index < 5; index += 1) await server.request(`/made-up-${index}-${Math.random()}`);
    const text = await metrics();
    expect(text).not.to.contain('made-up-');
    expect(
      value(text, 'arbiter_http_request_duration_seconds_count{endpoint="other",method="GET",status="404"}'),
    ).to.be.at.least(5);
  });

  it("answers every request with an X-Request-ID, the caller's when sensible, and keeps it in the audit entry", async function () {
    const given = await server.request('/token', {
      method: 'POST',
      headers: { 'X-Request-ID': 'trace-7f3a', 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });
    expect(given.headers.get('x-request-id')).to.equal('trace-7f3a');
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
    expect(entry.requestId).to.equal('trace-7f3a');
    const generated = await server.request('/healthz');
    expect(generated.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    const unreasonable = await server.request('/healthz', { headers: { 'X-Request-ID': 'x'.repeat(500) } });
    expect(unreasonable.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
  });
});

/** METRICS_TOKEN: /metrics for its bearer only, on the admin listener when there is one. */
describe('observability: /metrics behind METRICS_TOKEN', function () {
  const TOKEN = 'metrics-token-0123456789abcdef';
  const LIMIT = 3;
  let server: TestServer;

  before(async function () {
    // Its own server: it fails the token up to a small failure limit.
    server = await readyServer({ METRICS_TOKEN: TOKEN, ADMIN_PORT: '0', AUTH_FAILURE_LIMIT: String(LIMIT) });
  });
  after(async function () {
    await server?.close();
  });

  const scrape = (headers: Record<string, string> = {}) =>
    rawRequest(server.adminUrl!, { path: '/metrics', headers, localAddress: '127.0.0.1' });

  it('answers the bearer of the token, and 401 with a Bearer challenge to anyone else', async function () {
    const scraped = await scrape({ Authorization: `Bearer ${TOKEN}` });
    expect(scraped.status).to.equal(200);
    expect(scraped.text).to.contain('arbiter_http_request_duration_seconds');
    const anonymous = await scrape();
    expect(anonymous.status).to.equal(401);
    expect(anonymous.headers['www-authenticate']).to.equal('Bearer');
    expect(anonymous.json().error).to.equal('invalid_token');
    for (const authorization of ['Bearer not-the-token-0123456789', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
      const refused = await scrape({ Authorization: authorization });
      expect(refused.status, authorization).to.equal(401);
      expect(refused.headers['www-authenticate'], authorization).to.equal('Bearer error="invalid_token"');
    }
    expect(
      (await server.request('/metrics', { listener: 'public' })).status,
      'still not on the public listener',
    ).to.equal(404);
  });

  it('throttles wrong tokens like any failed credential, and still answers the right one', async function () {
    const from = '127.0.0.31';
    const wrong = () =>
      rawRequest(server.adminUrl!, {
        path: '/metrics',
        headers: { Authorization: 'Bearer wrong-0123456789' },
        localAddress: from,
      });
    for (let attempt = 0; attempt < LIMIT; attempt++) expect((await wrong()).status).to.equal(401);
    expect((await wrong()).status).to.equal(429);
    const right = await rawRequest(server.adminUrl!, {
      path: '/metrics',
      headers: { Authorization: `Bearer ${TOKEN}` },
      localAddress: from,
    });
    expect(right.status, 'the scraper is never locked out').to.equal(200);
  });
});

/** ACCESS_LOG: one line per request, with who called (address, client, user agent). */
describe('observability: access log lines', function () {
  it('name the caller: its address, the authenticated client_id, and its user agent (bounded)', async function () {
    const lines: Record<string, unknown>[] = [];
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const server = await readyServer({ LOG_LEVEL: 'info', ACCESS_LOG: 'true' }, { logStream });
    try {
      await policyInForce(server);
      const secret = await confidentialClient(server, 'logged', { scopes: ['read'] });
      const agent = `probe/1.0 ${'x'.repeat(1000)}`;
      expect(
        (await clientCredentials(server, 'logged', secret, { scope: 'read' }, { 'User-Agent': agent })).status,
      ).to.equal(200);
      const access = () => lines.find((line) => line.component === 'access' && line.path === '/token');
      const deadline = Date.now() + 10_000;
      while (!access() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      const line = access()!;
      expect(line, 'an access line for /token').to.not.equal(undefined);
      expect(line).to.include({ ip: '127.0.0.1', clientId: 'logged', status: 200 });
      expect(line.userAgent)
        .to.be.a('string')
        .and.to.match(/^probe\/1\.0 x+/);
      expect((line.userAgent as string).length, 'bounded').to.be.at.most(256);
      const health = lines.find((candidate) => candidate.component === 'access' && candidate.path === '/healthz');
      expect(health, 'no client on a request that named none').to.not.have.property('clientId');
    } finally {
      await server.close();
    }
  });
});
