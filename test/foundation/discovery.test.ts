import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sharedServer, startTestServer, type TestServer } from '../support/server.js';

describe('Discovery and JWKS', function () {
  let server: TestServer;
  let issuer: string;
  before(async function () {
    server = await sharedServer();
    issuer = server.config.issuer;
  });

  it('publishes every field of the spec discovery table with its value', async function () {
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
      resource_registration_endpoint: `${issuer}/resource_registration/resource`,
      permission_endpoint: `${issuer}/permission`,
      response_types_supported: ['code'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256'],
      client_id_metadata_document_supported: true,
    });
    expect(document.scopes_supported).to.deep.equal(['openid', 'profile', 'email']);
    expect(document.claims_supported).to.deep.equal(['sub', 'name', 'email', 'preferred_username', 'email_verified']);
    expect(document.authorization_details_types_supported).to.be.an('array');
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
      expect(key).to.include({ kty: 'RSA', use: 'sig', alg: 'RS256' });
    }
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
