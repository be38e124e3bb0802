import { expect } from 'chai';
import { decodeJwt } from 'jose';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { sharedChromium, loopbackContext, RedirectRecorder } from '../support/browser.js';
import {
  authorizationRequest,
  redeemCode,
  registerPublicClient,
  withSignInServer,
  type AuthorizationRequest,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import type { TestServer } from '../support/server.js';

/**
 * The whole sign-in in a real browser: Arbiter's /authorize, the development IdP's login
 * and consent pages, back through Arbiter to the client's redirect_uri; then the code at
 * /token, the profile at /userinfo and the subject in the Admin API.
 */
describe('Sign-in through an upstream identity provider, in Chromium', () => {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let redirects: RedirectRecorder;
  let spa: TestClient;
  let browser: Browser;
  let context: BrowserContext;

  before(async () => {
    ({ server, idp } = await withSignInServer());
    redirects = await RedirectRecorder.start();
    spa = await registerPublicClient(server, redirects.url);
    browser = await sharedChromium();
  });

  beforeEach(async () => {
    context = await loopbackContext(browser);
  });

  afterEach(async () => {
    await context?.close();
  });

  after(async () => {
    await redirects?.close();
  });

  const atClient = (url: URL) => url.href.startsWith(redirects.url);
  const atDevIdpForm = (url: URL) => url.host === idp.host && url.pathname.startsWith('/interaction/');

  /** What the client's redirect_uri received after the browser went from `url` to it. */
  async function arrivalAtClient(page: Page): Promise<URLSearchParams> {
    await page.waitForURL(atClient);
    const query = new URL(page.url()).searchParams;
    expect(redirects.last?.toString(), "the client's server saw the same redirect").to.equal(query.toString());
    return query;
  }

  /** Opens the authorization request, signs in as `login` at the dev IdP and passes its consent page. */
  async function signIn(page: Page, request: AuthorizationRequest, login: string): Promise<URLSearchParams> {
    await page.goto(request.url);
    await page.waitForURL(atDevIdpForm);
    await page.fill('input[name=login]', login);
    await page.fill('input[name=password]', 'any password');
    await page.click('button[type=submit]');
    await page.waitForSelector('input[name=prompt][value=consent]', { state: 'attached' });
    await page.click('button[type=submit]');
    return arrivalAtClient(page);
  }

  async function signedInTokens(login: string): Promise<Record<string, string>> {
    const request = await authorizationRequest(server, spa);
    const query = await signIn(await context.newPage(), request, login);
    const { status, body } = await redeemCode(server, spa, query.get('code')!, request.codeVerifier);
    expect(status, JSON.stringify(body)).to.equal(200);
    return body;
  }

  it('signs in at the dev IdP and returns to the client with a code and the state, which redeem for tokens', async () => {
    const request = await authorizationRequest(server, spa);

    const query = await signIn(await context.newPage(), request, 'alice');

    expect(query.get('state')).to.equal(request.state);
    expect(query.get('code')).to.be.a('string').and.not.be.empty;
    expect(query.has('error')).to.equal(false);
    const { status, body } = await redeemCode(server, spa, query.get('code')!, request.codeVerifier);
    expect(status).to.equal(200);
    expect(body).to.include({ token_type: 'Bearer' });
    expect(body.access_token).to.be.a('string');
    expect(decodeJwt(body.id_token)).to.include({ iss: server.config.issuer, sub: 'alice', aud: spa.clientId });
  });

  it('answers UserInfo, by GET and by POST, with the upstream profile', async () => {
    const { access_token: accessToken } = await signedInTokens('erin');
    const profile = {
      sub: 'erin',
      name: 'Erin',
      preferred_username: 'erin',
      email: 'erin@example.test',
      email_verified: true,
    };

    const viaGet = await fetch(`${server.config.issuer}/userinfo`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    const viaPost = await fetch(`${server.config.issuer}/userinfo`, {
      method: 'POST',
      headers: { authorization: `Bearer ${accessToken}` },
    });

    expect(viaGet.status).to.equal(200);
    expect(await viaGet.json()).to.deep.equal(profile);
    expect(viaPost.status).to.equal(200);
    expect(await viaPost.json()).to.deep.equal(profile);
  });

  it('keeps the subject with the allowed fields only, bound to the identity provider', async () => {
    await signedInTokens('frank');

    const { status, body } = await server.admin('GET', '/subjects');

    expect(status).to.equal(200);
    const frank = body.find((subject: { subjectId: string }) => subject.subjectId === 'frank');
    expect(frank).to.include({
      identityProviderId: idp.id,
      name: 'Frank',
      preferredUsername: 'frank',
      email: 'frank@example.test',
      tenantId: null,
    });
    const allowed = [
      'id',
      'subjectId',
      'identityProviderId',
      'name',
      'email',
      'emailVerified',
      'preferredUsername',
      'tenantId',
      'createdAt',
      'updatedAt',
    ];
    expect(Object.keys(frank)).to.satisfy(
      (keys: string[]) => keys.every((key) => allowed.includes(key)),
      `unexpected fields in ${Object.keys(frank)}`,
    );
  });

  it('reuses the Arbiter session: a second authorization returns without visiting the IdP', async () => {
    const page = await context.newPage();
    await signIn(page, await authorizationRequest(server, spa), 'grace');
    const visited: string[] = [];
    page.on('framenavigated', (frame) => visited.push(frame.url()));
    const second = await authorizationRequest(server, spa);

    await page.goto(second.url);
    const query = await arrivalAtClient(page);

    expect(query.get('state')).to.equal(second.state);
    expect(query.get('code')).to.be.a('string');
    expect(visited.filter((url) => new URL(url).host === idp.host)).to.deep.equal([]);
  });

  it("prompt=login sends a signed-in user to the IdP's login form again", async () => {
    const page = await context.newPage();
    await signIn(page, await authorizationRequest(server, spa), 'heidi');

    await page.goto((await authorizationRequest(server, spa, { prompt: 'login' })).url);

    await page.waitForURL(atDevIdpForm);
    expect(await page.locator('input[name=login]').count()).to.equal(1);
  });

  it('prompt=none without a session redirects to the client with login_required and the state', async () => {
    const request = await authorizationRequest(server, spa, { prompt: 'none' });
    const page = await context.newPage();

    await page.goto(request.url);
    const query = await arrivalAtClient(page);

    expect(query.get('error')).to.equal('login_required');
    expect(query.get('state')).to.equal(request.state);
    expect(query.has('code')).to.equal(false);
  });

  it('a user who cancels at the IdP sends the client access_denied with the state', async () => {
    const request = await authorizationRequest(server, spa);
    const page = await context.newPage();
    await page.goto(request.url);
    await page.waitForURL(atDevIdpForm);

    await page.click('text=[ Cancel ]');
    const query = await arrivalAtClient(page);

    expect(query.get('error')).to.equal('access_denied');
    expect(query.get('state')).to.equal(request.state);
    expect(query.has('code')).to.equal(false);
  });
});
