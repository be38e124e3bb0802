import { expect } from 'chai';
import { DpopKey } from '../support/dpop.js';
import { clientCredentials, confidentialClient } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';

/**
 * RFC 9449 §5.2: a client registered with `dpop_bound_access_tokens` (the record's
 * `dpopBoundAccessTokens`) always uses DPoP, so a token request of it without a proof is refused:
 * it never gets a Bearer token. Set through the Admin API or dynamic registration, as any member.
 * (Found 2026-11-30: the member was known only to FAPI 2.0 clients, for which Arbiter sets it;
 * any other client asking for it was silently given Bearer tokens.)
 */
describe('Clients registered for DPoP-bound access tokens (RFC 9449 §5.2)', function () {
  let server: TestServer;
  let key: DpopKey;

  before(async function () {
    server = await withServer();
    key = await DpopKey.generate();
  });

  const proof = () => key.proof('POST', `${server.config.issuer}/token`);

  it('refuses a token request of an Admin API client without a DPoP proof, and binds its token to the proof given', async function () {
    const secret = await confidentialClient(server, 'dpop-bound-admin-client', {
      scopes: ['read'],
      dpopBoundAccessTokens: true,
    });
    const record = await server.admin('GET', '/clients/dpop-bound-admin-client');
    expect(record.body.dpopBoundAccessTokens).to.equal(true);

    const bearer = await clientCredentials(server, 'dpop-bound-admin-client', secret, { scope: 'read' });
    expect(bearer.status, JSON.stringify(bearer.body)).to.equal(400);
    expect(bearer.body).to.include({ error: 'invalid_dpop_proof', error_description: 'DPoP proof JWT not provided' });

    const bound = await clientCredentials(
      server,
      'dpop-bound-admin-client',
      secret,
      { scope: 'read' },
      { DPoP: await proof() },
    );
    expect(bound.status, JSON.stringify(bound.body)).to.equal(200);
    expect(bound.body.token_type).to.equal('DPoP');
  });

  it('registers the member by dynamic registration, answers it and keeps it, as oidc-provider is given it for the Admin API client above', async function () {
    // With an initial access token: open registration is off by default, and the policy data is the whole server's.
    const initial = await server.admin('POST', '/initial-access-tokens', {});
    expect(initial.status, JSON.stringify(initial.body)).to.equal(201);
    const registered = await server.request('/register', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${initial.body.token}` },
      body: JSON.stringify({
        redirect_uris: ['https://dpop-bound.example.test/cb'],
        token_endpoint_auth_method: 'none',
        dpop_bound_access_tokens: true,
      }),
    });
    const body = (await registered.json()) as any;
    expect(registered.status, JSON.stringify(body)).to.equal(201);
    expect(body.dpop_bound_access_tokens).to.equal(true);
    expect((await server.admin('GET', `/clients/${body.client_id}`)).body.dpopBoundAccessTokens).to.equal(true);
    const read = await server.request(`/register/${body.client_id}`, {
      headers: { Authorization: `Bearer ${body.registration_access_token}` },
    });
    expect(((await read.json()) as any).dpop_bound_access_tokens).to.equal(true);
  });

  it('refuses a member that is not a boolean, naming it', async function () {
    const answer = await server.admin('POST', '/clients', {
      clientId: 'dpop-bound-bad-client',
      clientType: 'public',
      redirectUris: ['https://dpop-bound.example.test/cb'],
      dpopBoundAccessTokens: 'yes',
    });
    expect(answer.status).to.equal(400);
    expect(JSON.stringify(answer.body)).to.contain('dpopBoundAccessTokens');
  });
});
