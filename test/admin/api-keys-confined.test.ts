import { expect } from 'chai';
import { eventually } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';

type Json = any;

let counter = 0;
const unique = (name: string) => `confined-test ${name} ${Date.now().toString(36)}-${++counter}`;

/**
 * Admin API keys with an expiry and confined to tenants (issue 37, point 5): keys were server-wide
 * and never expired (`expiresAt is not a known field`), so no operator could be confined to one
 * tenant. A key may now carry `expiresAt` (after which it is no key) and `tenants` (it reaches
 * only those tenants, and nothing server-wide); both are in the audit.
 */
describe('Admin API keys with an expiry and confined to tenants', function () {
  let server: TestServer;

  before(async function () {
    server = await withServer();
  });

  async function call(key: string, method: string, path: string, options: { tenant?: string; json?: unknown } = {}) {
    const response = await server.request(`/admin/api${path}`, { method, key, ...options });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as Json };
  }

  async function createKey(body: Record<string, unknown>) {
    const created = await server.admin('POST', '/api-keys', body);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return created.body as { id: number; key: string; tenants?: string[]; expiresAt?: string };
  }

  it('reaches its own tenants only, and nothing server-wide', async function () {
    const { key, tenants } = await createKey({ name: unique('admin'), role: 'admin', tenants: ['confined-a'] });
    expect(tenants).to.deep.equal(['confined-a']);
    const clientId = `confined-${++counter}`;
    const made = await call(key, 'POST', '/clients', {
      tenant: 'confined-a',
      json: { clientId, clientType: 'confidential', scopes: ['read'], grantTypes: ['client_credentials'] },
    });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    expect((await call(key, 'GET', '/clients', { tenant: 'confined-a' })).status).to.equal(200);

    for (const [what, method, path, tenant] of [
      ['another tenant', 'GET', '/clients', 'confined-b'],
      ['the default tenant', 'GET', '/clients', undefined],
      ['another tenant named in the query', 'GET', '/clients?tenantId=confined-b', 'confined-a'],
      ['every tenant', 'GET', '/audit-logs?allTenants=true', 'confined-a'],
      ['the keys', 'GET', '/api-keys', 'confined-a'],
      ['the tenants', 'GET', '/tenants', 'confined-a'],
      ['the shared policy', 'GET', '/policy-rules', undefined],
      ['impact analysis', 'POST', '/policy-impact', 'confined-a'],
    ] as const) {
      const refused = await call(key, method, path, { tenant, json: method === 'POST' ? { changes: [] } : undefined });
      expect(refused.status, `${what}: ${JSON.stringify(refused.body)}`).to.equal(403);
      expect(refused.body.error).to.equal('insufficient_scope');
      expect(refused.body.error_description, what).to.contain('is confined to the tenants confined-a');
    }
    // A body naming another tenant is refused where the body is read.
    const elsewhere = await call(key, 'POST', '/clients', {
      tenant: 'confined-a',
      json: {
        tenantId: 'confined-b',
        clientId: `${clientId}-b`,
        clientType: 'public',
        grantTypes: ['authorization_code'],
      },
    });
    expect(elsewhere.status, JSON.stringify(elsewhere.body)).to.equal(403);

    const own = await call(key, 'GET', '/api-keys/current', { tenant: 'confined-a' });
    expect(own.status).to.equal(200);
    expect(own.body.tenants).to.deep.equal(['confined-a']);

    // The audit entry of its calls names the key with its tenants.
    const entries = (await server.admin('GET', `/audit-logs?tenantId=confined-a&size=50`)).body.content as Json[];
    const entry = entries.find((each) => each.requestSummary?.adminKey?.tenants);
    expect(entry?.requestSummary.adminKey.tenants).to.deep.equal(['confined-a']);
  });

  it('stops working at its expiresAt, and refuses an expiry in the past', async function () {
    const past = await server.admin('POST', '/api-keys', {
      name: unique('past'),
      role: 'read-only',
      expiresAt: new Date(Date.now() - 1000).toISOString(),
    });
    expect(past.status).to.equal(400);
    expect(past.body).to.include({ field: 'expiresAt' });
    const malformed = await server.admin('POST', '/api-keys', {
      name: unique('bad'),
      role: 'read-only',
      expiresAt: 'soon',
    });
    expect(malformed.status).to.equal(400);

    const { key, expiresAt } = await createKey({
      name: unique('short'),
      role: 'read-only',
      expiresAt: new Date(Date.now() + 3000).toISOString(),
    });
    expect(expiresAt).to.be.a('string');
    expect((await call(key, 'GET', '/api-keys/current')).status).to.equal(200);
    await eventually(async () => (await call(key, 'GET', '/api-keys/current')).status === 401, 15_000);
    expect(Date.now()).to.be.at.least(Date.parse(expiresAt!));
  });
});
