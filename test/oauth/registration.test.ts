import { expect } from 'chai';
import { UnsecuredJWT } from 'jose';
import { eventually, updateOauthData } from '../support/oauth.js';
import { startTestServer, type TestServer } from '../support/server.js';

/**
 * POST /register is policy-gated: the `register` decision point is asked before any client
 * is created. (Registration itself — generated ids, hashed secrets, software statement
 * entitlements — belongs to the registration issue; this covers the gate.)
 */
describe('POST /register, gated by the register policy', function () {
  let server: TestServer;
  const metadata = { redirect_uris: ['https://app.example.test/cb'], client_name: 'App', token_endpoint_auth_method: 'none' };

  before(async function () {
    // Its own server: the test opens registration in the shared policy data.
    server = await startTestServer();
    await server.waitUntilReady();
  });
  after(async function () {
    await server?.close();
  });

  const register = async (body: unknown, raw?: string) => {
    const response = await server.request('/register', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: raw ?? JSON.stringify(body) });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };

  it('refuses open registration while public_client_policy.enabled is false, and audits the denial', async function () {
    const { status, body } = await register(metadata);
    expect(status).to.equal(400);
    expect(body.error).to.equal('invalid_client_metadata');
    expect(body.error_description).to.match(/open registration is disabled/);
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/register&size=1&sort=id,desc')).body.content;
    expect(entry.outcome).to.equal('deny');
    expect(entry.policyInput.registration).to.deep.include({ client_type: 'public', token_endpoint_auth_method: 'none', software_statement: null });
  });

  it('answers malformed bodies and statements with a clear 400', async function () {
    expect((await register(undefined, '{"redirect_uris":')).status).to.equal(400);
    const notObject = await register(['https://app.example.test/cb']);
    expect(notObject.status).to.equal(400);
    expect(notObject.body.error).to.equal('invalid_client_metadata');
    const notJwt = await register({ ...metadata, software_statement: 'not-a-jwt' });
    expect(notJwt.status).to.equal(400);
    expect(notJwt.body.error).to.equal('invalid_software_statement');
  });

  it('refuses a software statement from an issuer policy data does not trust', async function () {
    const statement = new UnsecuredJWT({ software_id: '4b1c8f2e-8a34-4d8e-9b1f-0c2d3e4f5a6b' }).setIssuer('https://untrusted.example.test').setIssuedAt().encode();
    const { status, body } = await register({ ...metadata, software_statement: statement });
    expect(status).to.equal(400);
    expect(body.error).to.equal('invalid_software_statement');
    expect(JSON.stringify((await server.admin('GET', '/audit-logs?endpoint=/register&size=1&sort=id,desc')).body), 'the statement is never logged').not.to.contain(statement);
  });

  it('registers once policy data opens registration, within the allowed grant types', async function () {
    await updateOauthData(server, (data) => {
      data.public_client_policy.enabled = true;
    });
    await eventually(async () => (await register(metadata)).status === 201);
    const { status, body } = await register({ ...metadata, client_name: 'Second' });
    expect(status).to.equal(201);
    expect(body.client_id).to.be.a('string');
    expect(body.redirect_uris).to.deep.equal(metadata.redirect_uris);

    const disallowed = await register({ ...metadata, grant_types: ['client_credentials'] });
    expect(disallowed.status).to.equal(400);
    expect(disallowed.body.error).to.equal('invalid_client_metadata');
    expect(disallowed.body.error_description).to.match(/grant types not allowed: client_credentials/);
  });
});
