import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { clientsCollection } from '../../src/oauth/clients/records.js';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { inTenant, withServer, type TestServer } from '../support/server.js';

const TENANT = 'client-secrets';
/** The form of the secrets earlier releases generated (32 of [A-Za-z0-9]), random-looking. */
const EARLIER_GENERATED = 'q7Hk2LmP9xZr4TbV8nWc1YsJ6dFg3AeU';
const BCRYPT = /^\$2[aby]\$\d\d\$/;

/**
 * Client secrets are BCrypt hashes at rest; successful checks are remembered (src/oauth/clients/secrets.ts).
 * What is remembered must never let a changed, wrong or disabled client's secret through.
 */
describe('client secret verification and its cache', function () {
  let server: TestServer;

  before(async function () {
    // A tenant of its own on the shared server: its clients, tokens and audit entries are apart from other files'.
    server = inTenant(await withServer(), TENANT);
  });

  const token = (clientId: string, secret: string) =>
    postForm(
      server,
      '/token',
      { grant_type: 'client_credentials', scope: 'read' },
      { Authorization: basic(clientId, secret) },
    );
  const stored = async (clientId: string) =>
    (await clientsCollection(server.store, TENANT).findOne({ clientId }))!.clientSecret as string;
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

  it('keeps a secret the server generated as a keyed digest: not the secret, not BCrypt, checked at once', async function () {
    const created = await server.admin('POST', '/clients', {
      clientId: 'generated',
      clientType: 'confidential',
      generateClientSecret: true,
      scopes: ['read'],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const secret = created.body.generatedClientSecret as string;
    expect(secret).to.match(/^[A-Za-z0-9]{43}$/);
    const kept = await stored('generated');
    expect(kept).to.match(/^hmac-sha256:[\w-]{43}$/);
    expect(kept).not.to.contain(secret);
    expect((await token('generated', secret)).status).to.equal(200);
    for (const wrong of [
      `${secret}x`,
      secret.slice(0, -1),
      `${secret.slice(0, -1)}${secret.endsWith('a') ? 'b' : 'a'}`,
    ])
      expect((await token('generated', wrong)).status, wrong).to.equal(401);
  });

  it('keeps a secret an operator typed as BCrypt, before and after its use', async function () {
    const created = await server.admin('POST', '/clients', {
      clientId: 'typed',
      clientType: 'confidential',
      clientSecret: 'an operator typed this one',
      scopes: ['read'],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(await stored('typed')).to.match(BCRYPT);
    expect((await token('typed', 'an operator typed this one')).status).to.equal(200);
    expect(await stored('typed')).to.match(BCRYPT);
  });

  it("turns an earlier release's BCrypt hash of a generated secret into a keyed digest on its first use", async function () {
    const hash = bcrypt.hashSync(EARLIER_GENERATED, 4);
    await server.admin('POST', '/clients', {
      clientId: 'earlier',
      clientType: 'confidential',
      clientSecret: hash,
      scopes: ['read'],
    });
    expect((await token('earlier', EARLIER_GENERATED.toLowerCase())).status, 'a wrong secret').to.equal(401);
    expect(await stored('earlier'), 'a failure changes nothing').to.equal(hash);
    expect((await token('earlier', EARLIER_GENERATED)).status, 'the old hash works until then').to.equal(200);
    const upgraded = await stored('earlier');
    expect(upgraded).to.match(/^hmac-sha256:/);
    expect(upgraded).not.to.contain(EARLIER_GENERATED);
    expect((await token('earlier', EARLIER_GENERATED)).status).to.equal(200);
    expect((await token('earlier', EARLIER_GENERATED.toLowerCase())).status).to.equal(401);
  });

  it('leaves BCrypt a 32-character secret that does not look random', async function () {
    const typed = 'abcdabcdabcdabcdabcdabcdabcd1234';
    await server.admin('POST', '/clients', {
      clientId: 'patterned',
      clientType: 'confidential',
      clientSecret: bcrypt.hashSync(typed, 4),
      scopes: ['read'],
    });
    expect((await token('patterned', typed)).status).to.equal(200);
    expect(await stored('patterned')).to.match(BCRYPT);
  });
});
