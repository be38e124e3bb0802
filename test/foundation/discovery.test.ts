import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withServer, startTestServer, type TestServer } from '../support/server.js';

describe('Discovery and JWKS', function () {
  let server: TestServer;
  let issuer: string;
  before(async function () {
    server = await withServer();
    issuer = server.config.issuer;
  });

  it('publishes the fields of the spec discovery table with their values', async function () {
    const response = await server.request('/.well-known/openid-configuration');
    expect(response.status).to.equal(200);
    const document = (await response.json()) as any;
    expect(document).to.deep.include({
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      registration_endpoint: `${issuer}/register`,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      userinfo_endpoint: `${issuer}/userinfo`,
      introspection_endpoint: `${issuer}/introspect`,
      response_types_supported: ['code'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256', 'PS256'],
    });
    expect(document.scopes_supported).to.deep.equal(['openid', 'profile', 'email']);
    expect(document.claims_supported).to.deep.equal(['sub', 'name', 'email', 'preferred_username', 'email_verified']);
    expect(document.authorization_details_types_supported).to.be.an('array');
  });

  it('advertises client ID metadata documents, which work (test/oauth/client-metadata-documents.test.ts)', async function () {
    const document = (await (await server.request('/.well-known/openid-configuration')).json()) as any;
    expect(document.client_id_metadata_document_supported).to.equal(true);
  });

  it('advertises the UMA endpoints, which answer (test/uma/)', async function () {
    const document = (await (await server.request('/.well-known/openid-configuration')).json()) as any;

    expect(document.resource_registration_endpoint).to.equal(`${issuer}/resource_registration/resource`);
    expect(document.permission_endpoint).to.equal(`${issuer}/permission`);
    // They answer (here: a PAT is required), rather than 404.
    expect((await server.request('/resource_registration/resource')).status).to.equal(401);
    expect(
      (await server.request('/permission', { method: 'POST', json: { resource_id: 'r', resource_scopes: ['read'] } }))
        .status,
    ).to.equal(401);
    // Every endpoint it does advertise is served by this issuer.
    for (const [field, value] of Object.entries(document)) {
      if (field.endsWith('_endpoint') || field === 'jwks_uri')
        expect(value, field)
          .to.be.a('string')
          .that.satisfies((url: string) => url.startsWith(`${issuer}/`));
    }
  });

  it('advertises the PKCE methods and the grant types that work, and no others', async function () {
    const document = (await (await server.request('/.well-known/openid-configuration')).json()) as any;

    expect(document.code_challenge_methods_supported).to.have.members(['S256', 'plain']).and.have.length(2);
    expect(document.grant_types_supported)
      .to.have.members([
        'authorization_code',
        'client_credentials',
        'refresh_token',
        'urn:ietf:params:oauth:grant-type:token-exchange',
        'urn:ietf:params:oauth:grant-type:uma-ticket',
        'urn:ietf:params:oauth:grant-type:device_code',
      ])
      .and.have.length(6);
    expect(document.grant_types_supported).not.to.include('implicit');
    expect(document.device_authorization_endpoint).to.equal(`${issuer}/device/auth`);
  });

  it('serves the same issuer to every tenant', async function () {
    await server.admin('POST', '/subjects', { subjectId: 'makes-tenant-a-exist', tenantId: 'tenant-a' });
    const response = await server.request('/.well-known/openid-configuration', { tenant: 'tenant-a' });
    expect(((await response.json()) as any).issuer).to.equal(issuer);
  });

  it('publishes RSA public signing keys only', async function () {
    const response = await server.request('/.well-known/jwks.json');
    expect(response.status).to.equal(200);
    const { keys } = (await response.json()) as any;
    expect(keys).to.have.length.at.least(1);
    for (const key of keys) {
      expect(key).to.have.keys('kty', 'use', 'alg', 'kid', 'n', 'e');
      expect(key).to.include({ kty: 'RSA', use: 'sig' });
    }
    // Each RS256 key is published again for PS256 (FAPI 2.0 clients' ID tokens), under its own kid.
    const rs256 = keys.filter((key: { alg: string }) => key.alg === 'RS256');
    expect(rs256).to.have.length.at.least(1);
    expect(keys.filter((key: { alg: string }) => key.alg === 'PS256').map((key: { n: string }) => key.n)).to.deep.equal(
      rs256.map((key: { n: string }) => key.n),
    );
  });

  it('keeps its signing keys across restarts (generated once, kept in the store)', async function () {
    const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-keys-'));
    const env = { STORE_URL: `sqlite:${join(dataDir, 'keys.db')}`, OPA_URL: 'http://127.0.0.1:9' };
    try {
      const first = await startTestServer(env);
      const before = await (await first.request('/.well-known/jwks.json')).json();
      await first.close();
      const second = await startTestServer(env);
      const after = await (await second.request('/.well-known/jwks.json')).json();
      await second.close();
      expect(after).to.deep.equal(before);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
