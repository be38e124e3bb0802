import { expect } from 'chai';
import {
  authorizationRequest,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * An https ISSUER on a plain listener (TLS ends at a proxy in front): the protocol's cookies are
 * Secure and its absolute URLs https, whether or not TRUSTED_PROXIES names that proxy, unless a
 * trusted proxy says the request came over http.
 */
describe('An https issuer behind a TLS-terminating proxy', function () {
  let server: TestServer;

  before(async function () {
    server = await readyServer({ ISSUER: 'https://arbiter.example.test', TRUSTED_PROXIES: '127.0.0.2' });
  });
  after(async function () {
    await server?.close();
  });

  const cookiesOf = (response: Response) => response.headers.getSetCookie();

  it('sets its session cookies Secure, also when a caller says the request was http', async function () {
    for (const headers of [{}, { 'X-Forwarded-Proto': 'http' }]) {
      const cookies = cookiesOf(await server.request('/device', { headers }));
      expect(cookies.length, JSON.stringify(headers)).to.be.greaterThan(0);
      for (const cookie of cookies) expect(cookie.toLowerCase(), cookie).to.contain('; secure');
    }
  });

  it('builds https URLs for the browser', async function () {
    const page = await (await server.request('/device')).text();
    expect(page).to.match(/action="https:&#47;&#47;[^"]+&#47;device"/);
  });
});

/**
 * A trusted proxy that says a request came over http while the issuer is https (TLS ended before
 * it, say, at a CDN). Found 2026-11-30: Arbiter set its upstream sign-in cookie Secure from the
 * issuer alone, which Koa refuses on a request it takes as http: the sign-in answered 500.
 */
describe('An https issuer behind a trusted proxy that says http', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;

  before(async function () {
    server = await readyServer({ ISSUER: 'https://arbiter.example.test', TRUSTED_PROXIES: '127.0.0.1,::1' });
    idp = await startRegisteredDevIdp(server);
  });
  after(async function () {
    await idp?.close();
    await server?.close();
  });

  it('sends the browser upstream, its sign-in cookie not Secure, instead of a 500', async function () {
    const rp = await registerPublicClient(server, 'https://rp.example.test/cb');
    const { url } = await authorizationRequest(server, rp, { upstream_idp: idp.idpId });
    const asHttp = { 'X-Forwarded-Proto': 'http' };
    const started = await server.request(new URL(url).pathname + new URL(url).search, {
      headers: asHttp,
      redirect: 'manual',
    });
    expect(started.status).to.be.oneOf([302, 303]);
    const interaction = new URL(started.headers.get('location')!, url);
    const cookie = started.headers
      .getSetCookie()
      .map((each) => each.split(';')[0])
      .join('; ');
    const upstream = await server.request(interaction.pathname, {
      headers: { ...asHttp, cookie },
      redirect: 'manual',
    });
    expect(upstream.status, await upstream.clone().text()).to.be.oneOf([302, 303]);
    expect(new URL(upstream.headers.get('location')!).host).to.equal(idp.host);
    const binding = upstream.headers.getSetCookie().find((each) => each.startsWith('_upstream~'));
    expect(binding, 'the browser binding cookie').to.be.a('string');
    expect(binding!.toLowerCase()).not.to.contain('; secure');
  });
});
