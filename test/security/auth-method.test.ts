import { expect } from 'chai';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { inTenant, withServer, type TestServer } from '../support/server.js';

/**
 * Issue 27, item 11: a client authenticates with the method it registered (RFC 7591 §2).
 * Before, a client_secret_basic client got tokens with client_secret_post (and the reverse),
 * while the policy input and the audit said the registered method.
 */
describe('the registered token_endpoint_auth_method is enforced', function () {
  let server: TestServer;
  let basicSecret: string;
  let postSecret: string;

  before(async function () {
    // A tenant of its own on the shared server: its clients, tokens and audit entries are apart from other files'.
    server = inTenant(await withServer(), 'auth-method');
    basicSecret = await confidentialClient(server, 'basic-client', { scopes: ['read'] });
    postSecret = await confidentialClient(server, 'post-client', {
      scopes: ['read'],
      tokenEndpointAuthMethod: 'client_secret_post',
    });
  });

  const asBasic = (path: string, clientId: string, secret: string, form: Record<string, string>) =>
    postForm(server, path, form, { Authorization: basic(clientId, secret) });
  const asPost = (path: string, clientId: string, secret: string, form: Record<string, string>) =>
    postForm(server, path, { ...form, client_id: clientId, client_secret: secret });
  const grant = { grant_type: 'client_credentials', scope: 'read' };

  it('refuses a client_secret_basic client that posts its secret in the form, at /token and /introspect', async function () {
    const refused = await asPost('/token', 'basic-client', basicSecret, grant);
    expect(refused.status, JSON.stringify(refused.body)).to.equal(401);
    expect(refused.body.error).to.equal('invalid_client');
    const token = (await asBasic('/token', 'basic-client', basicSecret, grant)).body.access_token as string;
    expect(token).to.be.a('string');
    expect((await asPost('/introspect', 'basic-client', basicSecret, { token })).status).to.equal(401);
  });

  it('refuses a client_secret_post client that sends Basic, and serves it with its own method', async function () {
    const refused = await asBasic('/token', 'post-client', postSecret, grant);
    expect(refused.status, JSON.stringify(refused.body)).to.equal(401);
    expect(refused.body.error).to.equal('invalid_client');
    const allowed = await asPost('/token', 'post-client', postSecret, grant);
    expect(allowed.status, JSON.stringify(allowed.body)).to.equal(200);
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
    expect(entry.policyInput.client.authenticated_with).to.equal('client_secret_post');
  });
});
