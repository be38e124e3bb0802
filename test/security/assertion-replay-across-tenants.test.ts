import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { postForm } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';

const TENANTS = ['replay-acme', 'replay-globex'];
const CLIENT = 'replay-pkj';

/**
 * Tenants named by X-Tenant-Id share the server's issuer, so a client assertion made out to its
 * /token is good in each of them. Found 2026-11-30 (a crypto review): their replay records were
 * kept per tenant, and one assertion was taken once in each tenant where a client of that id has
 * its key (as a CIMD client has in every tenant). Its jti is now kept once for all of them.
 */
describe('a client assertion is taken once across the tenants that share the issuer', function () {
  let server: TestServer;
  let privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

  before(async function () {
    server = await withServer();
    const pair = await generateKeyPair('ES256', { extractable: true });
    privateKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'replay-key', alg: 'ES256', use: 'sig' };
    for (const tenantId of TENANTS) {
      const created = await server.admin('POST', '/clients', {
        clientId: CLIENT,
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'private_key_jwt',
        jwks: { keys: [jwk] },
        scopes: ['read'],
        tenantId,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
  });

  const assertionTo = (audience: string) =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: 'replay-key' })
      .setIssuer(CLIENT)
      .setSubject(CLIENT)
      .setAudience(audience)
      .setJti(randomUUID())
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(privateKey);
  const tokenWith = (assertion: string, headers: Record<string, string> = {}, path = '/token') =>
    postForm(
      server,
      path,
      {
        grant_type: 'client_credentials',
        client_id: CLIENT,
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: assertion,
      },
      headers,
    );

  it('refuses the assertion again in another tenant of the shared issuer', async function () {
    const assertion = await assertionTo(`${server.config.issuer}/token`);
    const [acme, globex] = TENANTS.map((tenant) => ({ 'X-Tenant-Id': tenant }));
    expect((await tokenWith(assertion, acme)).status, 'its first use').to.equal(200);
    for (const [headers, where] of [
      [acme, 'the same tenant'],
      [globex, 'another tenant'],
    ] as const) {
      const again = await tokenWith(assertion, headers);
      expect(again.status, where).to.equal(401);
      expect(again.body.error, where).to.equal('invalid_client');
      expect(again.body).not.to.have.property('access_token');
    }
  });

  it("still takes a tenant's own issuer's assertions at its path, once", async function () {
    const path = `/t/${TENANTS[1]}/token`;
    const assertion = await assertionTo(`${server.config.issuer}${path}`);
    expect((await tokenWith(assertion, {}, path)).status).to.equal(200);
    expect((await tokenWith(assertion, {}, path)).status).to.equal(401);
  });
});
