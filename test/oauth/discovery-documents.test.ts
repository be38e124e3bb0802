import { expect } from 'chai';
import * as client from 'openid-client';
import { confidentialClient, updateOauthData } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

const PATHS = [
  '/.well-known/openid-configuration',
  '/.well-known/oauth-authorization-server',
  '/.well-known/uma2-configuration',
];

/**
 * OpenID Connect Discovery, RFC 8414 authorization server metadata and UMA 2.0's configuration
 * are one document (src/oauth/discovery.ts): a client that reads RFC 8414 first (the MCP SDK) sees
 * what an OpenID Connect client sees, including what policy data defines at run time.
 */
describe('The discovery documents', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: a test changes the policy data every server shares.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  async function documents(): Promise<any[]> {
    return Promise.all(
      PATHS.map(async (path) => {
        const response = await server.request(path);
        expect(response.status, path).to.equal(200);
        return response.json();
      }),
    );
  }

  it('are equal field for field, RFC 8414 included', async function () {
    const [openid, oauth, uma] = await documents();
    expect(oauth).to.deep.equal(openid);
    expect(uma).to.deep.equal(openid);
  });

  it("carry in RFC 8414's document what only Arbiter adds: CIMD, the UMA endpoints, PKCE plain, revocation", async function () {
    const [, oauth] = await documents();
    const { issuer } = server.config;
    expect(oauth).to.deep.include({
      issuer,
      client_id_metadata_document_supported: true,
      permission_endpoint: `${issuer}/permission`,
      resource_registration_endpoint: `${issuer}/resource_registration/resource`,
      uma_profiles_supported: [],
      revocation_endpoint: `${issuer}/revoke`,
      end_session_endpoint: `${issuer}/session/end`,
    });
    expect(oauth.code_challenge_methods_supported).to.have.members(['S256', 'plain']);
  });

  it('name the client authentication methods /revoke and /introspect accept, no more', async function () {
    for (const [at, document] of (await documents()).entries()) {
      expect(document.revocation_endpoint_auth_methods_supported, PATHS[at]).to.deep.equal(
        document.token_endpoint_auth_methods_supported,
      );
      expect(document.revocation_endpoint_auth_methods_supported, PATHS[at]).to.have.members([
        'client_secret_basic',
        'client_secret_post',
        'private_key_jwt',
        'none',
      ]);
      // No `none`: a public client cannot introspect (test/oauth/introspection.test.ts); a Bearer access token can.
      expect(document.introspection_endpoint_auth_methods_supported, PATHS[at]).to.have.members([
        'client_secret_basic',
        'client_secret_post',
        'private_key_jwt',
        'Bearer',
      ]);
    }
  });

  it("are a path tenant's at the RFC 8414 §3.1 path-inserted URIs too, where oauth4webapi's oauth2 discovery looks", async function () {
    const tenant = 'inserted-acme';
    await confidentialClient(server, 'inserted-rp', { scopes: ['read'] }, tenant);
    const issuer = `${server.config.issuer}/t/${tenant}`;
    for (const path of PATHS) {
      const below = await server.request(`/t/${tenant}${path}`);
      const inserted = await server.request(`${path}/t/${tenant}`);
      expect(inserted.status, `${path}/t/${tenant}`).to.equal(200);
      const document = (await inserted.json()) as { issuer: string };
      expect(document.issuer).to.equal(issuer);
      expect(document).to.deep.equal(await below.json());
    }
    // openid-client's discovery with algorithm oauth2 is oauth4webapi's discoveryRequest: path insertion only.
    const discovered = await client.discovery(new URL(issuer), 'inserted-rp', undefined, undefined, {
      algorithm: 'oauth2',
      execute: [client.allowInsecureRequests],
    });
    expect(discovered.serverMetadata().token_endpoint).to.equal(`${issuer}/token`);
    expect((await server.request('/.well-known/oauth-authorization-server/t/nowhere')).status).to.equal(400);
    expect(
      (await server.request(`/.well-known/oauth-authorization-server/t/${tenant}`, { tenant: 'another' })).status,
      'the path and X-Tenant-Id name different tenants',
    ).to.equal(400);
  });

  it('list a RAR type policy data gains at once in every document, with no /token call in between', async function () {
    const type = 'urn:example:discovery-fresh';
    for (const document of await documents())
      expect(document.authorization_details_types_supported).not.to.include(type);

    await updateOauthData(server, (data) => {
      data.rar_only_types = { ...data.rar_only_types, [type]: {} };
    });

    const [openid, oauth, uma] = await documents();
    expect(openid.authorization_details_types_supported).to.include(type);
    expect(oauth.authorization_details_types_supported, 'RFC 8414').to.deep.equal(
      openid.authorization_details_types_supported,
    );
    expect(uma.authorization_details_types_supported).to.deep.equal(openid.authorization_details_types_supported);
  });
});
