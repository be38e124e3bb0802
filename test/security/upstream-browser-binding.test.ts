import { expect } from 'chai';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerPublicClient,
  withSignInServer,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import type { TestServer } from '../support/server.js';

/**
 * Session swapping (RFC 9700 §4.7): found 2026-11-29, the upstream callback trusted the state
 * alone. An attacker began an authorization request in its own browser, stopped at the upstream
 * provider's authorization URL (a genuine link of the provider) and had a victim open it: the
 * victim's code was redeemed for the attacker's interaction, and the attacker's browser finished
 * it as the victim (a code for her at the client, and a session as her). The callback now takes
 * a sign-in only from the browser that was sent upstream (a cookie on the callback path).
 */
describe('an upstream sign-in finishes only in the browser that began it', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let rp: TestClient;

  before(async function () {
    ({ server, idp } = await withSignInServer());
    rp = await registerPublicClient(server, 'http://127.0.0.1:1/browser-binding/cb', {
      clientId: 'browser-binding-rp',
    });
  });

  it("refuses the victim's trip through the callback, and the attacker's interaction gets nothing of hers", async function () {
    const request = await authorizationRequest(server, rp);
    const attacker = new FetchUserAgent();
    const atUpstream = await attacker.navigate(request.url, (url) => url.host === idp.host);
    const interaction = attacker.visited.find((url) => url.pathname.startsWith('/interaction/'))!;

    const victim = new FetchUserAgent();
    const loginPage = await victim.navigate(atUpstream.url, arrivingAt(rp.redirectUri));
    const victimEnd = await passDevIdpForms(victim, loginPage, 'victim-alice', arrivingAt(rp.redirectUri));
    expect(victim.visited.some((url) => url.pathname.startsWith('/idp/callback'))).to.equal(true);
    expect(victimEnd.status, 'the callback, in the wrong browser').to.equal(400);
    expect(victimEnd.body).to.contain('another browser');

    const landed = await attacker.navigate(
      `${interaction.origin}${interaction.pathname}/upstream-done`,
      arrivingAt(rp.redirectUri),
    );
    expect(landed.status, landed.url.href).to.equal(400);
    expect(landed.url.searchParams.get('code')).to.equal(null);
  });

  it('still signs in the browser that went upstream itself', async function () {
    const request = await authorizationRequest(server, rp);
    const browser = new FetchUserAgent();
    const page = await browser.navigate(request.url, arrivingAt(rp.redirectUri));
    const landed = await passDevIdpForms(browser, page, 'alice', arrivingAt(rp.redirectUri));
    const code = landed.url.searchParams.get('code');
    expect(code, landed.url.href).to.be.a('string');
    expect((await redeemCode(server, rp, code!, request.codeVerifier)).status).to.equal(200);
  });
});
