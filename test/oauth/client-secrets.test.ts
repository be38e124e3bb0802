import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { inTenant, withServer, type TestServer } from '../support/server.js';

/**
 * Client secrets are BCrypt hashes at rest; successful checks are remembered (src/oauth/clients/secrets.ts).
 * What is remembered must never let a changed, wrong or disabled client's secret through.
 */
describe('client secret verification and its cache', function () {
  let server: TestServer;

  before(async function () {
    // A tenant of its own on the shared server: its clients, tokens and audit entries are apart from other files'.
    server = inTenant(await withServer(), 'client-secrets');
  });

  const token = (clientId: string, secret: string) =>
    postForm(
      server,
      '/token',
      { grant_type: 'client_credentials', scope: 'read' },
      { Authorization: basic(clientId, secret) },
    );
  const replace = async (clientId: string, fields: Record<string, unknown>) => {
    const current = (await server.admin('GET', `/clients/${clientId}`)).body;
    const { id: _id, createdAt: _created, updatedAt: _updated, clientSecret: _secret, ...body } = current;
    const saved = await server.admin('PUT', `/clients/${clientId}`, { ...body, ...fields });
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200);
  };

  it('accepts the right secret again and again, never a wrong one after it', async function () {
    const secret = await confidentialClient(server, 'steady', { scopes: ['read'] });
    for (let attempt = 0; attempt < 3; attempt += 1) expect((await token('steady', secret)).status).to.equal(200);
    for (const wrong of [`${secret}x`, secret.slice(0, -1), secret.toUpperCase()])
      expect((await token('steady', wrong)).status, wrong).to.equal(401);
  });

  it('refuses the old secret as soon as the client has a new one', async function () {
    const secret = await confidentialClient(server, 'rotating', { scopes: ['read'] });
    expect((await token('rotating', secret)).status).to.equal(200);
    await replace('rotating', { clientSecret: bcrypt.hashSync('the-new-secret-value', 4) });
    expect((await token('rotating', secret)).status).to.equal(401);
    expect((await token('rotating', 'the-new-secret-value')).status).to.equal(200);
  });

  it('refuses a disabled client whose secret was just accepted', async function () {
    const secret = await confidentialClient(server, 'switched-off', { scopes: ['read'] });
    expect((await token('switched-off', secret)).status).to.equal(200);
    await replace('switched-off', { enabled: false, clientSecret: bcrypt.hashSync(secret, 4) });
    expect((await token('switched-off', secret)).status).to.equal(401);
  });

  it('checks a cost-10 hash (the production cost) too', async function () {
    await server.admin('POST', '/clients', {
      clientId: 'costly',
      clientType: 'confidential',
      clientSecret: bcrypt.hashSync('costly-secret', 10),
      scopes: ['read'],
    });
    expect((await token('costly', 'costly-secret')).status).to.equal(200);
    expect((await token('costly', 'costly-secret')).status).to.equal(200);
    expect((await token('costly', 'not-it')).status).to.equal(401);
  });
});
