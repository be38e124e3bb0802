import { expect } from 'chai';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * The identity provider the console signs operators in with (ADMIN_SIGN_IN_IDP) decides who gets
 * which role (ADMIN_SIGN_IN_GRANTS): an operator who could point its issuer or endpoints at a
 * server of their own would sign in as an admin. Only the admin role changes that record.
 */
describe('The console sign-in identity provider is changed by the admin role only (admin/auth.ts)', function () {
  let server: TestServer;
  let operatorKey: string;

  before(async function () {
    server = await readyServer({ ADMIN_SIGN_IN_IDP: 'operators' });
    for (const idpId of ['operators', 'partners']) {
      const created = await server.admin('POST', '/identity-providers', {
        idpId,
        issuer: `https://${idpId}.example.test`,
        clientSecret: 'upstream-secret',
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
    const key = await server.admin('POST', '/api-keys', { name: 'an-operator', role: 'operator' });
    expect(key.status, JSON.stringify(key.body)).to.equal(201);
    operatorKey = key.body.key as string;
  });
  after(async function () {
    await server?.close();
  });

  const asOperator = async (method: string, path: string, json?: unknown, key = operatorKey) => {
    const response = await server.request(`/admin/api${path}`, {
      method,
      headers: { 'X-Admin-API-Key': key, ...(json ? { 'content-type': 'application/json' } : {}) },
      body: json ? JSON.stringify(json) : undefined,
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('refuses an operator a change of its issuer or endpoints, and its deletion (403), and changes nothing', async function () {
    const changed = await asOperator('PUT', '/identity-providers/operators', {
      idpId: 'operators',
      issuer: 'https://attacker.example.test',
      userinfoEndpoint: 'https://attacker.example.test/userinfo',
      clientSecret: 'attacker-secret',
    });
    expect(changed.status, JSON.stringify(changed.body)).to.equal(403);
    expect(changed.body.error).to.equal('insufficient_scope');
    expect(changed.body.error_description).to.contain('ADMIN_SIGN_IN_IDP');
    expect((await asOperator('DELETE', '/identity-providers/operators')).status).to.equal(403);
    // An admin key confined to the default tenant may not make itself an unconfined admin either.
    const confined = await server.admin('POST', '/api-keys', {
      name: 'confined-admin',
      role: 'admin',
      tenants: ['_default'],
    });
    expect(confined.status, JSON.stringify(confined.body)).to.equal(201);
    const byConfined = await asOperator(
      'PUT',
      '/identity-providers/operators',
      { idpId: 'operators', issuer: 'https://attacker.example.test', clientSecret: 'attacker-secret' },
      confined.body.key as string,
    );
    expect(byConfined.status, JSON.stringify(byConfined.body)).to.equal(403);
    expect(byConfined.body.error_description).to.contain('not confined to tenants');
    const kept = await server.admin('GET', '/identity-providers/operators');
    expect(kept.body.issuer).to.equal('https://operators.example.test');
  });

  it('lets an operator change every other identity provider, and the admin role this one', async function () {
    const other = await asOperator('PUT', '/identity-providers/partners', {
      idpId: 'partners',
      issuer: 'https://partners-new.example.test',
      clientSecret: 'new-upstream-secret',
    });
    expect(other.status, JSON.stringify(other.body)).to.equal(200);
    const byAdmin = await server.admin('PUT', '/identity-providers/operators', {
      idpId: 'operators',
      issuer: 'https://operators-new.example.test',
      clientSecret: 'new-upstream-secret',
    });
    expect(byAdmin.status, JSON.stringify(byAdmin.body)).to.equal(200);
  });

  it('refuses an operator the creation of that record when it is absent (403), and lets it make one of that name in another tenant', async function () {
    expect((await server.admin('DELETE', '/identity-providers/operators')).status).to.equal(204);
    const attacker = { idpId: 'operators', issuer: 'https://attacker.example.test', clientSecret: 'attacker-secret' };
    const created = await asOperator('POST', '/identity-providers', attacker);
    expect(created.status, JSON.stringify(created.body)).to.equal(403);
    expect(created.body.error).to.equal('insufficient_scope');
    expect(created.body.error_description).to.contain('ADMIN_SIGN_IN_IDP');
    expect((await server.admin('GET', '/identity-providers/operators')).status).to.equal(404);
    // In another tenant the name is an ordinary identity provider's.
    const elsewhere = await asOperator('POST', '/identity-providers', { ...attacker, tenantId: 'partners-tenant' });
    expect(elsewhere.status, JSON.stringify(elsewhere.body)).to.equal(201);
    const byAdmin = await server.admin('POST', '/identity-providers', {
      idpId: 'operators',
      issuer: 'https://operators.example.test',
      clientSecret: 'upstream-secret',
    });
    expect(byAdmin.status, JSON.stringify(byAdmin.body)).to.equal(201);
  });
});
