import { expect } from 'chai';
import { clientCredentials } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * The registry of tenants through the Admin API: the configured ones listed from the start, a
 * tenant created with POST /tenants usable at once with X-Tenant-Id, one made by a record's
 * write listed too; paging, search, conflicts and hostile ids.
 */
describe('Admin API tenants', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: the tenants it lists are exactly those configured here and made below.
    server = await readyServer({ TENANTS: 'configured-b,configured-a' });
  });

  after(async function () {
    await server?.close();
  });

  const ids = (body: { id: string }[]) => body.map((tenant) => tenant.id);

  it('lists the configured tenants from the start, marked as such, without the default tenant', async function () {
    const listed = await server.admin('GET', '/tenants');
    expect(listed.status).to.equal(200);
    expect(listed.body).to.have.length(2);
    expect(listed.body[0]).to.include({ id: 'configured-a', configured: true });
    expect(listed.body[0].createdAt).to.be.a('string');
    expect(ids(listed.body)).to.deep.equal(['configured-a', 'configured-b']);
    expect(listed.headers.get('x-total-count')).to.equal('2');
  });

  it('creates a tenant that X-Tenant-Id may name at once, and refuses it a second time with 409', async function () {
    const protocolBefore = await server.request('/token', { method: 'POST', tenant: 'acme' });
    expect(((await protocolBefore.json()) as { error_description: string }).error_description).to.contain(
      'names no tenant',
    );

    const created = await server.admin('POST', '/tenants', { id: 'acme' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body).to.include({ id: 'acme', configured: false });
    const protocolAfter = await server.request('/token', { method: 'POST', tenant: 'acme' });
    expect(JSON.stringify(await protocolAfter.json())).not.to.contain('names no tenant');

    expect(
      (
        await server.admin(
          'POST',
          '/clients',
          { clientId: 'acme-app', clientType: 'confidential', clientSecret: 'acme-secret', scopes: ['read'] },
          { 'X-Tenant-Id': 'acme' },
        )
      ).status,
    ).to.equal(201);
    const token = await clientCredentials(
      server,
      'acme-app',
      'acme-secret',
      { scope: 'read' },
      { 'X-Tenant-Id': 'acme' },
    );
    expect(token.status, JSON.stringify(token.body)).to.equal(200);

    const again = await server.admin('POST', '/tenants', { id: 'acme' });
    expect(again.status).to.equal(409);
    expect(again.body).to.include({ error: 'conflict', field: 'id' });
    expect((await server.admin('POST', '/tenants', { id: 'configured-a' })).status).to.equal(409);
    expect((await server.admin('GET', '/tenants/acme')).body).to.include({ id: 'acme' });
  });

  it('lists a tenant that a record of the Admin API brought into being', async function () {
    expect(
      (await server.admin('POST', '/subjects', { subjectId: 'zed' }, { 'X-Tenant-Id': 'by-record' })).status,
    ).to.equal(201);
    expect(ids((await server.admin('GET', '/tenants')).body)).to.include('by-record');
  });

  it('pages and searches the tenants', async function () {
    const first = await server.request('/admin/api/tenants?limit=2', { admin: true });
    expect(first.headers.get('x-total-count')).to.equal('4');
    expect(first.headers.get('link')).to.equal('</admin/api/tenants?limit=2&offset=2>; rel="next"');
    const found = await server.admin('GET', '/tenants?q=CONFIGURED');
    expect(ids(found.body)).to.deep.equal(['configured-a', 'configured-b']);
    expect((await server.admin('GET', `/tenants?q=${encodeURIComponent('.*')}`)).body).to.deep.equal([]);
  });

  it('refuses a malformed id, the default tenant, extra fields and a body that is no object with 400', async function () {
    for (const body of [
      { id: '' },
      { id: '_default' },
      { id: '-leading-dash' },
      { id: 'a'.repeat(65) },
      { id: 'has space' },
      { id: '../etc' },
      { id: 42 },
      { id: 'ok', extra: true },
      {},
      ['acme'],
      'acme',
      null,
    ]) {
      const refused = await server.admin('POST', '/tenants', body);
      expect(refused.status, JSON.stringify(body)).to.equal(400);
      expect(refused.body.error, JSON.stringify(body)).to.equal('invalid_request');
    }
    expect((await server.admin('GET', '/tenants/_default')).status).to.equal(404);
    expect((await server.admin('GET', '/tenants/no-such-tenant')).status).to.equal(404);
  });

  it('lets a read-only key list tenants, and only an operator or admin create them (403 otherwise)', async function () {
    const keyOf = async (role: string) =>
      (await server.admin('POST', '/api-keys', { name: `tenants ${role}`, role })).body.key as string;
    const readOnly = await keyOf('read-only');
    const operator = await keyOf('operator');
    expect((await server.request('/admin/api/tenants', { key: readOnly })).status).to.equal(200);
    const refused = await server.request('/admin/api/tenants', {
      method: 'POST',
      key: readOnly,
      json: { id: 'ro-made' },
    });
    expect(refused.status).to.equal(403);
    expect(ids((await server.admin('GET', '/tenants')).body)).not.to.include('ro-made');
    const made = await server.request('/admin/api/tenants', { method: 'POST', key: operator, json: { id: 'op-made' } });
    expect(made.status).to.equal(201);
  });

  it("audits a tenant's creation as that tenant's, naming the key", async function () {
    const entries = await server.admin('GET', '/audit-logs?tenantId=op-made&endpoint=/admin/api/tenants');
    expect(entries.body.content).to.have.length(1);
    expect(entries.body.content[0]).to.include({ method: 'POST', tenantId: 'op-made' });
    expect(entries.body.content[0].requestSummary.adminKey.name).to.equal('tenants operator');
  });
});
