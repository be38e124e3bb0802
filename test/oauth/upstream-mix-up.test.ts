import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { expect } from 'chai';
import { identityProviderRecords } from '../../src/catalog/index.js';
import { openArbiterStore } from '../../src/collections.js';
import { MIGRATIONS } from '../../src/migrations.js';
import { DEFAULT_TENANT, migrate } from '../../src/store/index.js';
import { TENANTS_COLLECTION } from '../../src/tenancy/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  registerPublicClient,
  startRegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { freePort, readyServer, type TestServer } from '../support/server.js';

/**
 * Mix-up (RFC 9700 §4.4): with several upstream identity providers in a tenant, one of them must
 * not get a code another issued. Found 2026-11-29: every provider came back to the one
 * /idp/callback, so a provider could send the browser on to another (Arbiter's client_id there,
 * the same state and PKCE challenge) and have that one's code, with the PKCE verifier, redeemed at
 * its own token endpoint. Each provider now has a callback of its own, and a response is taken
 * only at the callback its sign-in was sent with.
 */
describe('Upstream identity providers: each its own callback (mix-up)', function () {
  let server: TestServer;
  let rp: TestClient;
  const stubs: Server[] = [];
  /** The token requests the two stub providers received (none may carry the honest one's code). */
  const tokenRequests: { at: string; body: string }[] = [];

  before(async function () {
    server = await readyServer();
    rp = await registerPublicClient(server, 'http://127.0.0.1:1/mix-up/cb');
  });
  after(async function () {
    for (const stub of stubs) stub.close();
    await server?.close();
  });

  /** A stub OpenID provider at a free port: discovery, and its token endpoint recording what it gets. */
  async function stubProvider(name: string, authorize: (url: URL, issuer: string) => string): Promise<string> {
    const port = await freePort();
    const issuer = `http://localhost:${port}`;
    const answer = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
      const url = new URL(request.url!, issuer);
      if (url.pathname === '/.well-known/openid-configuration')
        return void response.end(
          JSON.stringify({
            issuer,
            authorization_endpoint: `${issuer}/auth`,
            token_endpoint: `${issuer}/token`,
            jwks_uri: `${issuer}/jwks`,
            response_types_supported: ['code'],
            subject_types_supported: ['public'],
            id_token_signing_alg_values_supported: ['RS256'],
            code_challenge_methods_supported: ['S256'],
          }),
        );
      if (url.pathname === '/auth') {
        response.writeHead(302, { location: authorize(url, issuer) });
        return void response.end();
      }
      if (url.pathname === '/token') tokenRequests.push({ at: name, body: await bodyOf(request) });
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end('{"error":"invalid_grant"}');
    };
    const stub = createServer((request, response) => void answer(request, response).catch(() => response.destroy()));
    stubs.push(stub);
    await new Promise<void>((resolve) => stub.listen(port, '127.0.0.1', resolve));
    return issuer;
  }

  it("refuses a response brought to another provider's callback, and redeems its code nowhere", async function () {
    // The honest provider: its user is signed in there already, and it sends a code at once, to a
    // redirect URI registered with it only (as every provider must), without `iss` (RFC 9207).
    const registered = [`${server.config.issuer}/idp/callback`, `${server.config.issuer}/idp/callback/honest`];
    const honest = await stubProvider('honest', (url, issuer) => {
      const back = new URL(url.searchParams.get('redirect_uri')!);
      if (!registered.includes(back.href)) return `${issuer}/unregistered-redirect-uri`;
      back.searchParams.set('code', 'CODE-OF-HONEST');
      back.searchParams.set('state', url.searchParams.get('state')!);
      return back.href;
    });
    // The other provider of the tenant sends the browser on to the honest one with Arbiter's client
    // there, keeping state and PKCE challenge, to one of the redirect URIs registered there.
    let target = '';
    const evil = await stubProvider('evil', (url) => {
      const onward = new URL(`${honest}/auth`);
      url.searchParams.forEach((value, name) => onward.searchParams.set(name, value));
      onward.searchParams.set('client_id', 'arbiter-at-honest');
      onward.searchParams.set('redirect_uri', target);
      return onward.href;
    });
    for (const [idpId, issuer] of [
      ['honest', honest],
      ['evil', evil],
    ])
      expect(
        (await server.admin('POST', '/identity-providers', { idpId, issuer, clientId: `arbiter-at-${idpId}` })).status,
      ).to.equal(201);

    const viaEvil = async () => {
      const request = await authorizationRequest(server, rp, { upstream_idp: 'evil' });
      const agent = new FetchUserAgent();
      const landed = await agent.navigate(request.url, arrivingAt(rp.redirectUri));
      expect(agent.visited.map((url) => url.href).filter((href) => href.startsWith(target))).to.have.length(1);
      expect(landed.url.searchParams.get('error'), target).to.equal('access_denied');
      expect(tokenRequests, target).to.deep.equal([]);
      return landed.url.searchParams.get('error_description');
    };
    for (target of registered) await viaEvil();
    // Found 2026-11-29: with the other provider kept on the shared callback, the honest one's code
    // came back there, the callback of the sign-in begun at the other, and was redeemed at its token
    // endpoint with the PKCE verifier. Without `iss`, a tenant of several providers cannot tell.
    const kept = await server.admin('PUT', '/identity-providers/evil', {
      idpId: 'evil',
      issuer: evil,
      clientId: 'arbiter-at-evil',
      sharedCallback: true,
    });
    expect(kept.status, JSON.stringify(kept.body)).to.equal(200);
    target = registered[0]!;
    expect(await viaEvil()).to.contain('iss');
  });

  it('completes a sign-in at its own callback, and one at the shared callback for a provider that keeps it', async function () {
    for (const fields of [{}, { sharedCallback: true }]) {
      const idp = await startRegisteredDevIdp(server, { fields });
      try {
        const request = await authorizationRequest(server, rp, { upstream_idp: idp.idpId });
        const agent = new FetchUserAgent();
        const login = await agent.navigate(request.url, arrivingAt(rp.redirectUri));
        const landed = await passDevIdpForms(agent, login, `mixup-${idp.idpId}`, arrivingAt(rp.redirectUri));
        expect(landed.url.searchParams.get('code'), landed.url.href).to.be.a('string');
        const callback = agent.visited.find((url) => url.pathname.startsWith('/idp/callback'))!;
        expect(callback.pathname).to.equal(fields.sharedCallback ? '/idp/callback' : `/idp/callback/${idp.idpId}`);
      } finally {
        await idp.close();
      }
    }
  });
});

describe('Upgrading a store whose identity providers came back to the shared callback (schema version 6)', function () {
  it("keeps every tenant's providers at the shared callback their upstream knows; a provider set to its own stays so", async function () {
    const store = await openArbiterStore('sqlite::memory:');
    try {
      await migrate(
        store,
        MIGRATIONS.filter((step) => step.to <= 5),
      );
      await store.collection(TENANTS_COLLECTION, DEFAULT_TENANT).insert({ id: 'acme' });
      const provider = (id: number, idpId: string, extra: Record<string, unknown> = {}) => ({
        id,
        idpId,
        issuer: `https://${idpId}.example`,
        enabled: true,
        tenantId: null as string | null,
        ...extra,
      });
      await identityProviderRecords(store, DEFAULT_TENANT).insert(provider(1, 'corp'));
      await identityProviderRecords(store, DEFAULT_TENANT).insert(provider(2, 'own', { sharedCallback: false }));
      await identityProviderRecords(store, 'acme').insert(provider(3, 'acme-sso', { tenantId: 'acme' }));

      expect(await migrate(store, MIGRATIONS)).to.include({ from: 5 });
      const shared = async (tenant: string, id: number) =>
        (await identityProviderRecords(store, tenant).get(id))!.sharedCallback;
      expect(await shared(DEFAULT_TENANT, 1)).to.equal(true);
      expect(await shared(DEFAULT_TENANT, 2)).to.equal(false);
      expect(await shared('acme', 3)).to.equal(true);
    } finally {
      await store.close();
    }
  });
});

function bodyOf(request: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => resolve(body));
  });
}
