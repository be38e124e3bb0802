import { expect } from 'chai';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, startRegisteredDevIdp, type RegisteredDevIdp } from '../support/dev-idp.js';
import { basic, clientCredentials, confidentialClient, FORM, postForm } from '../support/oauth.js';
import { rawRequest } from '../support/raw-http.js';
import { withServer, type TestServer } from '../support/server.js';

const ACME = 'paths-acme';
const GLOBEX = 'paths-globex';
const REDIRECT_URI = 'http://127.0.0.1:1/tenant-paths/cb';

/**
 * Tenants as paths: /t/<tenant>/… is every protocol endpoint of the tenant under its own issuer
 * (<ISSUER>/t/<tenant>), its discovery document, JWKS and browser sign-in included, with no
 * X-Tenant-Id and so no proxy to add it.
 */
describe('Tenants as paths: /t/<tenant> with its own issuer', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let idpOfGlobex: RegisteredDevIdp;
  const issuerOf = (tenant: string) => `${server.config.issuer}/t/${tenant}`;

  before(async function () {
    server = await withServer();
    // Each tenant's users sign in at the dev IdP, which sends them back below the tenant's own issuer.
    idp = await startRegisteredDevIdp(server, { tenantId: ACME, tenantPath: true, idpId: 'paths-idp' });
    idpOfGlobex = await startRegisteredDevIdp(server, { tenantId: GLOBEX, tenantPath: true, idpId: 'paths-idp' });
    for (const tenantId of [ACME, GLOBEX]) {
      const created = await server.admin('POST', '/clients', {
        clientId: 'paths-rp',
        clientType: 'public',
        tokenEndpointAuthMethod: 'none',
        redirectUris: [REDIRECT_URI],
        scopes: ['openid', 'profile', 'email'],
        tenantId,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
    await confidentialClient(
      server,
      'paths-rs',
      { grantedResources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }] },
      ACME,
    );
    await confidentialClient(
      server,
      'paths-rs',
      { grantedResources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }] },
      GLOBEX,
    );
    await confidentialClient(server, 'paths-machine', { scopes: ['read'] }, ACME);
  });

  after(async function () {
    await idp?.close();
    await idpOfGlobex?.close();
  });

  /** An authorization request of paths-rp at the tenant's own authorization endpoint. */
  async function authorizationUrl(tenant: string, extra: Record<string, string> = {}): Promise<string> {
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: 'paths-rp',
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      state: 'st',
      code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      ...extra,
    });
    return `${issuerOf(tenant)}/authorize?${query}`;
  }

  /** That request walked by `agent` to the redirect_uri. */
  async function authorize(agent: FetchUserAgent, tenant: string, extra: Record<string, string> = {}): Promise<URL> {
    const page = await agent.navigate(await authorizationUrl(tenant, extra), arrivingAt(REDIRECT_URI));
    if (page.status === undefined) return page.url;
    return (await passDevIdpForms(agent, page, 'alice', arrivingAt(REDIRECT_URI))).url;
  }

  it("publishes the tenant's own discovery document, every endpoint below its issuer, and the JWKS there", async function () {
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
      const response = await server.request(`/t/${ACME}${path}`);
      expect(response.status, path).to.equal(200);
      const document = (await response.json()) as Record<string, unknown>;
      expect(document.issuer, path).to.equal(issuerOf(ACME));
      const urls = Object.entries(document).filter(([field]) => field.endsWith('_endpoint') || field === 'jwks_uri');
      expect(urls.length, path).to.be.above(8);
      for (const [field, url] of urls) expect(url, `${path} ${field}`).to.match(new RegExp(`^${issuerOf(ACME)}/`));
    }
    // The tenant's own keys (test/security/tenant-keys.test.ts): none of the default tenant's.
    const kidsAt = async (path: string) =>
      ((await (await server.request(path)).json()) as { keys: { kid: string }[] }).keys.map((key) => key.kid);
    const shared = await kidsAt('/.well-known/jwks.json');
    const own = await kidsAt(`/t/${ACME}/.well-known/jwks.json`);
    expect(own).to.not.be.empty;
    expect(own.filter((kid) => shared.includes(kid))).to.be.empty;
    // The shared issuer's document is as before.
    const document = (await (await server.request('/.well-known/openid-configuration')).json()) as { issuer: string };
    expect(document.issuer).to.equal(server.config.issuer);
  });

  it("signs a user in end to end with openid-client using the tenant's issuer, without X-Tenant-Id", async function () {
    const configuration = await client.discovery(new URL(issuerOf(ACME)), 'paths-rp', undefined, client.None(), {
      execute: [client.allowInsecureRequests, client.enableNonRepudiationChecks],
    });
    expect(configuration.serverMetadata().issuer).to.equal(issuerOf(ACME));
    const codeVerifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(
      client.buildAuthorizationUrl(configuration, {
        redirect_uri: REDIRECT_URI,
        scope: 'openid profile email',
        state,
        nonce,
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      }),
      arrivingAt(REDIRECT_URI),
    );
    expect(loginPage.url.host, "the tenant's identity provider").to.equal(idp.host);
    const arrived = await passDevIdpForms(agent, loginPage, 'alice', arrivingAt(REDIRECT_URI));
    // Every step at Arbiter stayed below the tenant's path: the sign-in pages and the upstream callback.
    const atArbiter = agent.visited.filter((url) => url.host === new URL(server.url).host);
    expect(atArbiter.length).to.be.above(3);
    for (const url of atArbiter) expect(url.pathname, url.href).to.match(new RegExp(`^/t/${ACME}/`));
    expect(arrived.url.searchParams.get('iss'), 'RFC 9207').to.equal(issuerOf(ACME));

    const tokens = await client.authorizationCodeGrant(configuration, arrived.url, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
      expectedNonce: nonce,
      idTokenExpected: true,
    });
    expect(tokens.claims()).to.include({ iss: issuerOf(ACME), sub: 'alice', nonce });
    expect(await client.fetchUserInfo(configuration, tokens.access_token, 'alice')).to.include({ sub: 'alice' });
    const refreshed = await client.refreshTokenGrant(configuration, tokens.refresh_token!);
    expect(refreshed.access_token).to.be.a('string');

    // Tokens of this tenant are unknown to another: at its path, under its header, and at the shared issuer.
    const userinfo = (path: string, headers: Record<string, string> = {}) =>
      server.request(path, { headers: { Authorization: `Bearer ${refreshed.access_token}`, ...headers } });
    expect((await userinfo(`/t/${ACME}/userinfo`)).status).to.equal(200);
    expect((await userinfo(`/t/${GLOBEX}/userinfo`)).status).to.equal(401);
    expect((await userinfo('/userinfo', { 'X-Tenant-Id': GLOBEX })).status).to.equal(401);
    expect((await userinfo('/userinfo')).status).to.equal(401);
    const refreshElsewhere = await postForm(server, `/t/${GLOBEX}/token`, {
      grant_type: 'refresh_token',
      refresh_token: refreshed.refresh_token!,
      client_id: 'paths-rp',
    });
    expect(refreshElsewhere.status, JSON.stringify(refreshElsewhere.body)).to.be.oneOf([400, 401]);
    expect(refreshElsewhere.body.error).to.be.oneOf(['invalid_grant', 'invalid_client']);
  });

  it("keeps each tenant's session below its own path: a sign-in at another tenant leaves the first one's", async function () {
    const agent = new FetchUserAgent();
    expect((await authorize(agent, ACME)).searchParams.get('code'), 'signed in at acme').to.be.a('string');
    expect((await authorize(agent, GLOBEX)).searchParams.get('code'), 'signed in at globex').to.be.a('string');
    const silent = await authorize(agent, ACME, { prompt: 'none' });
    expect(silent.searchParams.get('error'), silent.href).to.equal(null);
    expect(silent.searchParams.get('code'), 'still signed in at acme').to.be.a('string');
    const elsewhere = await authorize(new FetchUserAgent(), GLOBEX, { prompt: 'none' });
    expect(elsewhere.searchParams.get('error'), 'a new browser has no session').to.equal('login_required');
  });

  it('lets two sign-ins under way in one browser each finish: each interaction has a cookie of its own', async function () {
    const agent = new FetchUserAgent();
    const start = async () => agent.navigate(await authorizationUrl(ACME), arrivingAt(REDIRECT_URI));
    const first = await start();
    const second = await start();
    for (const [name, page] of [
      ['the first, finished after the second began', first],
      ['the second', second],
    ] as const) {
      const landed = await passDevIdpForms(agent, page, 'alice', arrivingAt(REDIRECT_URI));
      expect(landed.url.searchParams.get('code'), `${name}: ${landed.url.href} ${landed.body ?? ''}`).to.be.a('string');
    }
  });

  it("answers an access token active at its own tenant's introspection, inactive at another's", async function () {
    const issued = await postForm(
      server,
      `/t/${ACME}/token`,
      { grant_type: 'client_credentials', scope: 'read' },
      { Authorization: basic('paths-machine', 'paths-machine-secret-value') },
    );
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    const introspect = (tenant: string) =>
      postForm(
        server,
        `/t/${tenant}/introspect`,
        { token: issued.body.access_token },
        { Authorization: basic('paths-rs', 'paths-rs-secret-value') },
      );
    expect((await introspect(ACME)).body).to.include({ active: true, client_id: 'paths-machine', iss: issuerOf(ACME) });
    expect((await introspect(GLOBEX)).body).to.deep.equal({ active: false });
    // The client itself is unknown to the shared issuer's default tenant.
    expect(
      (await clientCredentials(server, 'paths-machine', 'paths-machine-secret-value', { scope: 'read' })).status,
    ).to.equal(401);
  });

  it('refuses a path and an X-Tenant-Id naming different tenants, a malformed or unknown tenant, and operator paths', async function () {
    const token = (path: string, headers: Record<string, string> = {}) =>
      rawRequest(server.url, {
        method: 'POST',
        path,
        headers: { ...FORM, Authorization: basic('paths-machine', 'paths-machine-secret-value'), ...headers },
        body: 'grant_type=client_credentials&scope=read',
      });
    const crossing = await token(`/t/${ACME}/token`, { 'X-Tenant-Id': GLOBEX });
    expect(crossing.status).to.equal(400);
    expect(crossing.json()).to.deep.include({ error: 'invalid_request' });
    expect(crossing.json().error_description).to.contain('different tenants');
    expect((await token(`/t/${ACME}/token`, { 'X-Tenant-Id': ACME })).status, 'the same tenant twice').to.equal(200);
    for (const path of ['/t/_default/token', '/t/a%2Fb/token', '/t//token', `/t/${'x'.repeat(65)}/token`]) {
      const malformed = await token(path);
      expect(malformed.status, path).to.equal(400);
      expect(malformed.json().error, path).to.equal('invalid_request');
    }
    const unknown = await token('/t/paths-nobody/token');
    expect(unknown.status).to.equal(400);
    expect(unknown.json().error_description).to.contain('/t/paths-nobody names no tenant');
    for (const path of [
      '/admin/api/clients',
      '/ADMIN/api/clients',
      '/admin',
      '/metrics',
      '/healthz',
      '/policy/bundle.tar.gz',
    ]) {
      const response = await rawRequest(server.url, { path: `/t/${ACME}${path}`, headers: { 'X-Admin-API-Key': 'x' } });
      expect(response.status, path).to.equal(404);
    }
  });
});
