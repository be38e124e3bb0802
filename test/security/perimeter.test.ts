import { expect } from 'chai';
import { ADMIN_KEY, readyServer, withServer, type TestServer } from '../support/server.js';
import { basic, confidentialClient, FORM, postForm } from '../support/oauth.js';
import { rawRequest } from '../support/raw-http.js';

const KEY = { 'X-Admin-API-Key': ADMIN_KEY };

describe('Perimeter: the Admin API gate', function () {
  let server: TestServer;
  before(async function () {
    server = await withServer();
  });

  /** Spellings that name the Admin surface without being the one the router serves. */
  const SPELLINGS = [
    '/ADMIN/api/clients',
    '/Admin/api/policy-rules',
    '/admin/API/clients',
    '/admin/Api/audit-logs',
    '//admin/api/clients',
    '/admin//api/clients',
    '/admin/api//clients',
    '/admin/api/clients/',
    '/%61dmin/api/clients',
    '/admin/api/%63lients',
    '/admin/%2561pi/clients',
    '/admin/api/./clients',
    '/x/../admin/api/clients',
    '/x/%2e%2e/admin/api/clients',
    '/admin/api/clients/../policy-rules',
  ];

  it('asks for the key at every spelling of an Admin path, for reads and writes, and audits the refusal', async function () {
    for (const path of SPELLINGS) {
      for (const method of ['GET', 'POST', 'DELETE']) {
        const body =
          method === 'POST' ? JSON.stringify({ clientId: `spelled-${method}`, clientType: 'public' }) : undefined;
        const response = await rawRequest(server.url, {
          method,
          path,
          body,
          headers: body ? { 'Content-Type': 'application/json' } : {},
        });
        expect(response.status, `${method} ${path}`).to.equal(401);
        expect(response.json().error).to.equal('unauthorized');
      }
    }
    expect((await server.admin('GET', '/clients/spelled-POST')).status, 'nothing was created').to.equal(404);
    const audited = await server.admin(
      'GET',
      `/audit-logs?endpoint=${encodeURIComponent('/ADMIN/api/clients')}&size=100`,
    );
    expect(
      audited.body.content.map((entry: any) => [entry.method, entry.requestSummary.status, entry.outcome]),
    ).to.deep.include.members([
      ['GET', 401, 'deny'],
      ['POST', 401, 'deny'],
      ['DELETE', 401, 'deny'],
    ]);
  });

  it('answers 404 with the key for a spelling the router does not serve, and serves the exact one', async function () {
    for (const path of SPELLINGS) {
      const response = await rawRequest(server.url, { path, headers: KEY });
      expect(response.status, path).to.equal(404);
    }
    expect((await rawRequest(server.url, { path: '/admin/api/clients', headers: KEY })).status).to.equal(200);
  });

  it('audits Admin reads as well as writes', async function () {
    await rawRequest(server.url, { path: '/admin/api/subjects?size=1', headers: KEY });
    const audited = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&size=100');
    expect(
      audited.body.content.some((entry: any) => entry.method === 'GET' && entry.requestSummary.status === 200),
    ).to.equal(true);
  });
});

describe('Perimeter: repeated parameters', function () {
  let server: TestServer;
  let secret: string;
  before(async function () {
    server = await withServer();
    secret = await confidentialClient(server, 'repeat-svc', { scopes: ['read'] });
  });

  it('refuses a repeated form parameter at /token and /introspect with 400 invalid_request naming it', async function () {
    for (const [path, body] of [
      ['/token', 'grant_type=client_credentials&scope=read&scope=read'],
      ['/token', 'grant_type=client_credentials&grant_type=client_credentials'],
      ['/token', 'grant_type=authorization_code&code=a&code=b&client_id=some-public-app'],
      ['/introspect', 'token=a&token=b'],
    ] as const) {
      const response = await server.request(path, {
        method: 'POST',
        headers: { ...FORM, Authorization: basic('repeat-svc', secret) },
        body,
      });
      expect(response.status, body).to.equal(400);
      const answer = (await response.json()) as any;
      expect(answer.error).to.equal('invalid_request');
      expect(answer.error_description).to.match(/'(scope|grant_type|code|token)' was given more than once/);
    }
  });

  it('lets resource repeat at /token only (RFC 8707), where a client_credentials token for several is invalid_target', async function () {
    const several = await server.request('/token', {
      method: 'POST',
      headers: { ...FORM, Authorization: basic('repeat-svc', secret) },
      body: 'grant_type=client_credentials&resource=urn:a&resource=urn:b',
    });
    expect(several.status).to.equal(400);
    expect(((await several.json()) as any).error).to.equal('invalid_target');
    const introspected = await server.request('/introspect', {
      method: 'POST',
      headers: { ...FORM, Authorization: basic('repeat-svc', secret) },
      body: 'token=a&resource=urn:a&resource=urn:b',
    });
    expect(introspected.status).to.equal(400);
    expect(((await introspected.json()) as any).error_description).to.contain("'resource' was given more than once");
  });

  it('refuses a repeated query parameter at /authorize and at discovery', async function () {
    for (const path of [
      '/authorize?client_id=a&client_id=b&response_type=code',
      '/.well-known/openid-configuration?x=1&x=2',
    ]) {
      const response = await server.request(path);
      expect(response.status, path).to.equal(400);
      expect(((await response.json()) as any).error).to.equal('invalid_request');
    }
  });

  it('never falls back to another tenant on a repeated Admin query parameter', async function () {
    await confidentialClient(server, 'twice-named', {});
    const { status, body } = await server.admin('DELETE', '/clients/twice-named?tenantId=t-twice&tenantId=t-twice');
    expect(status).to.equal(400);
    expect(body.error_description).to.contain("'tenantId'");
    expect(
      (await server.admin('GET', '/clients/twice-named')).status,
      "the default tenant's client is still there",
    ).to.equal(200);
  });
});

describe('Perimeter: tenants', function () {
  let server: TestServer;
  before(async function () {
    server = await withServer();
  });

  it('answers 400 for a tenant that does not exist, and serves it once the Admin API created an object for it', async function () {
    const before = await server.request('/.well-known/openid-configuration', { tenant: 'not-yet-a-tenant' });
    expect(before.status).to.equal(400);
    expect(((await before.json()) as any).error_description).to.match(/no tenant/);
    expect(
      (await server.admin('POST', '/subjects', { subjectId: 'first', tenantId: 'not-yet-a-tenant' })).status,
    ).to.equal(201);
    const after = await server.request('/.well-known/openid-configuration', { tenant: 'not-yet-a-tenant' });
    expect(after.status).to.equal(200);
  });

  it('serves the tenants listed in TENANTS without any object, and keeps working past the provider cache cap', async function () {
    const capped = await readyServer({ TENANTS: 'listed-a,listed-b,listed-c', TENANT_CACHE_MAX: '2' });
    try {
      const secrets = new Map<string, string>();
      for (const tenant of ['listed-a', 'listed-b', 'listed-c'])
        secrets.set(tenant, await confidentialClient(capped, `app-${tenant}`, { scopes: ['read'] }, tenant));
      // Round robin over three tenants with room for two: every request finds its provider evicted.
      for (let round = 0; round < 2; round++) {
        for (const [tenant, secret] of secrets) {
          const { status, body } = await postForm(
            capped,
            '/token',
            { grant_type: 'client_credentials', scope: 'read' },
            { Authorization: basic(`app-${tenant}`, secret), 'X-Tenant-Id': tenant },
          );
          expect(status, `${tenant} round ${round}`).to.equal(200);
          expect(body.access_token).to.be.a('string');
        }
      }
      expect((await capped.request('/.well-known/openid-configuration', { tenant: 'listed-c' })).status).to.equal(200);
      expect((await capped.request('/.well-known/openid-configuration', { tenant: 'unlisted' })).status).to.equal(400);
    } finally {
      await capped.close();
    }
  });
});

describe('Perimeter: the audit log is tenant-scoped', function () {
  let server: TestServer;
  before(async function () {
    server = await withServer();
  });

  it('lists and shows only the tenant of the call; allTenants=true is the explicit way to see all', async function () {
    const created = await server.admin('POST', '/subjects', { subjectId: 'audit-scoped', tenantId: 'audit-t1' });
    expect(created.status).to.equal(201);
    const inTenant = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&size=1000', undefined, {
      'X-Tenant-Id': 'audit-t1',
    });
    const entry = inTenant.body.content.find((candidate: any) => candidate.method === 'POST');
    expect(entry?.tenantId).to.equal('audit-t1');
    const inDefault = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&size=1000');
    expect(inDefault.body.content.every((candidate: any) => candidate.tenantId === null)).to.equal(true);
    expect(inDefault.body.content.map((candidate: any) => candidate.id)).not.to.include(entry.id);
    expect((await server.admin('GET', `/audit-logs/${entry.id}`)).status, "another tenant's entry").to.equal(404);
    expect(
      (await server.admin('GET', `/audit-logs/${entry.id}`, undefined, { 'X-Tenant-Id': 'audit-t1' })).status,
    ).to.equal(200);
    expect((await server.admin('GET', `/audit-logs/${entry.id}?allTenants=true`)).status).to.equal(200);
    const all = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&size=1000&allTenants=true');
    expect(all.body.content.map((candidate: any) => candidate.id)).to.include(entry.id);
  });
});

describe('Perimeter: security headers', function () {
  let server: TestServer;
  before(async function () {
    server = await withServer();
  });

  it('sends nosniff and no-referrer on JSON, and forbids framing of HTML pages', async function () {
    const json = await server.request('/.well-known/openid-configuration');
    expect(json.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(json.headers.get('referrer-policy')).to.equal('no-referrer');
    const error = await server.request('/admin/api/clients');
    expect(error.headers.get('x-content-type-options')).to.equal('nosniff');
    const html = await server.request(
      '/authorize?client_id=nobody-at-all&response_type=code&redirect_uri=https%3A%2F%2Fx.example%2Fcb',
    );
    expect(html.headers.get('content-type')).to.match(/text\/html/);
    expect(html.headers.get('content-security-policy')).to.contain("frame-ancestors 'none'");
    expect(html.headers.get('x-frame-options')).to.equal('DENY');
    expect(html.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(html.headers.get('referrer-policy')).to.equal('no-referrer');
  });
});
