import { expect } from 'chai';
import { authorizationRequest, registerPublicClient, type TestClient } from '../support/dev-idp.js';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * Each sign-in begun at /authorize stores an interaction until it ends or expires, for anyone who
 * knows a public client's client_id: one address could fill the store (found 2026-11-29). An
 * address begins at most SIGN_INS_PER_ADDRESS sign-ins per window; requests that begin none are
 * not counted. So it asks for at most as many device codes, and pushes as many requests for public
 * clients, each counted on its own.
 */
describe('Sign-ins one address may begin (SIGN_INS_PER_ADDRESS)', function () {
  let server: TestServer;
  let spa: TestClient;

  before(async function () {
    // Its own server: a budget of 3, and its own count of this address.
    server = await readyServer({ SIGN_INS_PER_ADDRESS: '3', SIGN_INS_WINDOW_SECONDS: '600' });
    spa = await registerPublicClient(server, 'http://127.0.0.1:1/budget/cb');
  });
  after(async function () {
    await server?.close();
  });

  const authorize = async (extra: Record<string, string> = {}) => {
    const answer = await server.request((await authorizationRequest(server, spa, extra)).url.slice(server.url.length));
    await answer.body?.cancel();
    return answer;
  };

  it('refuses the address 429 with Retry-After past its sign-ins, storing nothing more; requests that begin none are not counted', async function () {
    const interactions = async () =>
      (await server.store.collection('oidc', '_default').find({ model: 'Interaction' })).length;
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const silent = await authorize({ prompt: 'none' });
      expect(silent.status, 'an error at the redirect URI begins no sign-in').to.equal(302);
      expect(new URL(silent.headers.get('location')!).searchParams.get('error')).to.equal('login_required');
    }
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const begun = await authorize();
      expect(begun.status).to.be.oneOf([302, 303]);
      expect(begun.headers.get('location')).to.match(/\/interaction\//);
    }
    const stored = await interactions();
    const refused = await authorize();
    expect(refused.status).to.equal(429);
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 600);
    expect(await interactions(), 'nothing stored for the refused request').to.equal(stored);
  });

  // Found 2026-11-29: both stored a row per anonymous request, without bound (500 device codes a
  // second; 248 pushed requests a second of 80 KB each).
  it('counts the device codes and the pushed requests of public clients one address asks for, each on its own', async function () {
    const device = await server.admin('POST', '/clients', {
      clientId: 'budget-tv',
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      grantTypes: ['urn:ietf:params:oauth:grant-type:device_code'],
      scopes: ['openid'],
    });
    expect(device.status, JSON.stringify(device.body)).to.equal(201);
    const deviceCode = () => postForm(server, '/device/auth', { client_id: 'budget-tv', scope: 'openid' });
    const pushed = async () => {
      const request = new URL((await authorizationRequest(server, spa)).url);
      return postForm(server, '/par', Object.fromEntries(request.searchParams));
    };
    for (const ask of [deviceCode, pushed]) {
      // At once, so that each of the first three holds its place while under way.
      const statuses = (await Promise.all(Array.from({ length: 8 }, () => ask()))).map((answer) => answer.status);
      expect(
        statuses.filter((status) => status === 200 || status === 201),
        String(statuses),
      ).to.have.length(3);
      expect(
        statuses.filter((status) => status === 429),
        String(statuses),
      ).to.have.length(5);
    }
    // An authenticated client's are its own: not counted, nor refused for what public ones did.
    const secret = await confidentialClient(server, 'budget-backend', {
      grantTypes: ['urn:ietf:params:oauth:grant-type:device_code'],
      scopes: ['openid'],
    });
    for (let attempt = 0; attempt < 4; attempt += 1) {
      const own = await postForm(
        server,
        '/device/auth',
        { scope: 'openid' },
        { Authorization: basic('budget-backend', secret) },
      );
      expect(own.status, JSON.stringify(own.body)).to.equal(200);
    }
  });
});
