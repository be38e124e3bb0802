import { expect } from 'chai';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';

/**
 * oidc-provider's router matches paths ASCII case-insensitively and with one trailing slash
 * ignored; Arbiter's route table (src/oauth/edge.ts) looks paths up the same way, so that no
 * spelling of an endpoint reaches oidc-provider without what Arbiter adds there.
 */
describe('Endpoint paths in any spelling oidc-provider accepts', function () {
  let server: TestServer;
  let secret: string;

  before(async function () {
    server = await withServer();
    secret = await confidentialClient(server, 'spelling-svc', { scopes: ['read'] });
  });

  it('never registers a client at /REGISTER or /register/ without the register decision', async function () {
    const metadata = {
      redirect_uris: ['https://rp.example/cb'],
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      response_types: [],
    };
    for (const path of ['/REGISTER', '/Register', '/register/']) {
      const response = await server.request(path, { method: 'POST', json: metadata });
      const body = (await response.json()) as Record<string, unknown>;
      expect(response.status, `${path}: ${JSON.stringify(body)}`).to.equal(400);
      expect(body.error).to.equal('invalid_client_metadata');
      expect(body).not.to.have.property('client_id');
    }
  });

  it("applies /token's own steps at /TOKEN and /token/", async function () {
    for (const path of ['/TOKEN', '/token/']) {
      const issued = await postForm(
        server,
        path,
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('spelling-svc', secret) },
      );
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      expect(issued.headers.get('pragma')).to.equal('no-cache');
      const refused = await postForm(
        server,
        path,
        { grant_type: 'password', username: 'someone', password: 'secret' },
        { Authorization: basic('spelling-svc', secret) },
      );
      expect(refused.status).to.equal(400);
      expect(refused.body).to.deep.equal({
        error: 'unsupported_grant_type',
        error_description: 'the password grant is not supported',
      });
    }
  });
});
