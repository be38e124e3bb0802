import { expect } from 'chai';
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
