import { expect } from 'chai';
import { base64url, UnsecuredJWT } from 'jose';
import { clientCredentials, updateOauthData } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { StatementIssuer } from '../support/statement-issuer.js';

const ENTITLEMENT = { type: 'urn:as:introspect', scopes: ['uma_protection', 'introspection'] };

/**
 * Issue 27, item 2: wherever policy data trusts an issuer for software statements, a statement
 * is a signed JWS of that issuer (RFC 7591 §2.3), with SERVICE_SOFTWARE_STATEMENT_VERIFY at its
 * default (false) and open registration disabled. Unsigned, expired and wrongly signed
 * statements registered fully entitled clients before.
 */
describe('forged software statements register nothing', function () {
  let server: TestServer;
  let issuer: StatementIssuer;

  before(async function () {
    // Its own server: the test changes the shared policy data.
    server = await readyServer();
    issuer = await StatementIssuer.start();
    await updateOauthData(server, (data) => {
      data.trusted_issuers = { [issuer.url]: { jwks_uri: `${issuer.url}/jwks`, uses: ['software_statement'] } };
    });
  });

  after(async function () {
    await server?.close();
    await issuer?.close();
  });

  const register = async (statement: string) => {
    const response = await server.request('/register', {
      method: 'POST',
      json: {
        redirect_uris: ['https://rs.example.test/cb'],
        grant_types: ['client_credentials'],
        software_statement: statement,
      },
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const clientCount = async () => (await server.store.collection('clients', '_default').find({})).length;
  const claims = () => ({
    software_id: `app-${Math.random().toString(36).slice(2)}`,
    grant_types: ['client_credentials'],
    granted_resources: [ENTITLEMENT],
  });

  const forgeries: [string, () => Promise<string>][] = [
    ['unsigned (alg none)', async () => new UnsecuredJWT(claims()).setIssuer(issuer.url).setIssuedAt().encode()],
    ['expired (exp 1000)', () => issuer.sign({ ...claims(), exp: 1000 })],
    [
      'HS256 with a garbage signature',
      async () => {
        const header = base64url.encode(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
        const payload = base64url.encode(
          JSON.stringify({ ...claims(), iss: issuer.url, iat: Math.floor(Date.now() / 1000) }),
        );
        return `${header}.${payload}.${base64url.encode('garbage-signature')}`;
      },
    ],
    [
      'signed with the right kid by another key',
      async () => {
        const other = await StatementIssuer.start();
        await other.close();
        return other.sign({ ...claims(), iss: issuer.url });
      },
    ],
  ];

  for (const [what, forge] of forgeries) {
    it(`refuses a statement ${what} with invalid_software_statement, and stores no client`, async function () {
      const before = await clientCount();
      const { status, body } = await register(await forge());
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_software_statement');
      expect(body).not.to.have.property('client_id');
      expect(await clientCount()).to.equal(before);
    });
  }

  it("registers a client from the issuer's signed statement, with its entitlements", async function () {
    const { status, body } = await register(await issuer.sign(claims()));
    expect(status, JSON.stringify(body)).to.equal(201);
    const token = await clientCredentials(server, body.client_id, body.client_secret, {
      scope: 'uma_protection',
      resource: 'urn:as:introspect',
    });
    expect(token.status, JSON.stringify(token.body)).to.equal(200);
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/register&size=1&sort=id,desc')).body.content;
    expect(entry.policyInput.registration.software_statement.verified).to.equal(true);
  });
});
