import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import type * as client from 'openid-client';
import type { Page } from '../support/browser.js';
import { withSignInServer, type RegisteredDevIdp } from '../support/dev-idp.js';
import { LogoutReceiver } from '../support/logout-receiver.js';
import {
  Browser,
  CALLBACK,
  conformanceClient,
  redeem,
  responseParameters,
  type ConformanceClient,
} from '../support/relying-party.js';
import type { TestServer } from '../support/server.js';

/** Where the suite asks a static client's logout to return: the redirect URI's alias with /post_logout_redirect. */
const POST_LOGOUT = CALLBACK.replace(/\/callback$/, '/post_logout_redirect');
const BACK_CHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
const arrivingAtPostLogout = (url: URL) => url.href.startsWith(POST_LOGOUT);

/** The suite's end-session state: 128 characters, to check that the OP does not corrupt it. */
const longState = () => randomBytes(96).toString('base64url');

/**
 * The RP-initiated logout modules of both plans share their steps (AbstractOIDCCRpInitiatedLogout):
 * a sign-in, then the user sent to the end_session_endpoint with what the module chooses, then,
 * where the user is logged out, an authorization request with prompt=none that must fail.
 */
class LogoutWalk {
  constructor(
    readonly server: TestServer,
    readonly idp: RegisteredDevIdp,
    readonly rp: ConformanceClient,
  ) {}

  private people = 0;

  /** A fresh browser in which a person of its own signed in; the ID token the RP got. */
  async signedIn(prefix: string): Promise<{ browser: Browser; idToken: string }> {
    const browser = new Browser(this.idp, `${prefix}-${(this.people += 1)}`);
    const tokens = await redeem(this.rp, await browser.authorize(this.rp));
    return { browser, idToken: tokens.id_token! };
  }

  get metadata(): client.ServerMetadata {
    return this.rp.configuration.serverMetadata();
  }

  /** The user agent sent to the end_session_endpoint with `parameters`: the page it stops at (the post-logout redirect, or a page of the OP). */
  endSession(browser: Browser, parameters: Record<string, string>): Promise<Page> {
    const url = new URL(this.metadata.end_session_endpoint!);
    for (const [name, value] of Object.entries(parameters)) url.searchParams.set(name, value);
    return browser.agent.navigate(url, arrivingAtPostLogout);
  }

  /** The user confirms the logout on the OP's page (the suite's tester does, where the OP asks). */
  confirm(browser: Browser, page: Page): Promise<Page> {
    expect(page.status, page.body).to.equal(200);
    expect(page.body, 'the logout confirmation').to.contain('name="logout"');
    return browser.agent.submitForm(page, { logout: 'yes' }, arrivingAtPostLogout);
  }

  /** CheckErrorFromAuthorizationEndpointIsOneThatRequiredAUserInterface, after the logout. */
  async expectLoggedOut(browser: Browser): Promise<void> {
    const error = (await responseParameters(await browser.authorize(this.rp, { prompt: 'none' }))).get('error');
    expect(error).to.be.oneOf([
      'login_required',
      'interaction_required',
      'consent_required',
      'account_selection_required',
    ]);
  }

  /** CheckPostLogoutState, CheckForUnexpectedParametersInPostLogoutRedirect: back at the RP with its state and nothing else. */
  expectPostLogoutRedirect(page: Page, state?: string): void {
    expect(page.url.href.startsWith(POST_LOGOUT), page.url.href).to.equal(true);
    expect(Object.fromEntries(page.url.searchParams)).to.deep.equal(state === undefined ? {} : { state });
  }

  /** The OP did not send the user back: an error page or a page of its own (ExpectInvalidIdTokenHintErrorPage and the like). */
  expectNoRedirect(page: Page): void {
    expect(page.url.href.startsWith(POST_LOGOUT), `not redirected to ${page.url.href}`).to.equal(false);
  }
}

/**
 * The OpenID Foundation's `oidcc-rp-initiated-logout-certification-test-plan` (discovery,
 * client_secret_basic, default response mode, static client with a post_logout_redirect_uri
 * registered as the suite asks), walked with openid-client and a cookie-keeping user agent: one
 * test per module, in the plan's order. Where the suite asks for a screenshot (an error page, or
 * the OP's confirmation), the test checks the page instead. The suite's logout pages run over
 * https; this walk runs on loopback http, so CheckDiscEndSessionEndpoint's https part is not checked.
 */
describe('oidcc-rp-initiated-logout-certification-test-plan (discovery, client_secret_basic, static client)', function () {
  let walk: LogoutWalk;

  before(async function () {
    const { server, idp } = await withSignInServer();
    const rp = await conformanceClient(server, 'oidcc-rp-logout-rp', 'client_secret_basic', {
      postLogoutRedirectUris: [POST_LOGOUT],
    });
    walk = new LogoutWalk(server, idp, rp);
  });

  it('oidcc-rp-initiated-logout-discovery-endpoint-verification', function () {
    const endpoint = walk.metadata.end_session_endpoint;
    expect(endpoint).to.be.a('string');
    expect(endpoint!.startsWith(`${walk.metadata.issuer}/`)).to.equal(true);
  });

  it('oidcc-rp-initiated-logout', async function () {
    const { browser, idToken } = await walk.signedIn('rp-logout');
    const state = longState();
    const confirmation = await walk.endSession(browser, {
      id_token_hint: idToken,
      post_logout_redirect_uri: POST_LOGOUT,
      state,
    });
    walk.expectPostLogoutRedirect(await walk.confirm(browser, confirmation), state);
    await walk.expectLoggedOut(browser);
  });

  it('oidcc-rp-initiated-logout-bad-post-logout-redirect-uri', async function () {
    const { browser, idToken } = await walk.signedIn('rp-logout-bad-uri');
    const page = await walk.endSession(browser, {
      id_token_hint: idToken,
      post_logout_redirect_uri: `${POST_LOGOUT}-unregistered`,
      state: longState(),
    });
    walk.expectNoRedirect(page);
    expect(page.status).to.equal(400);
    expect(page.body).to.contain('post_logout_redirect_uri');
  });

  it('oidcc-rp-initiated-logout-modified-id-token-hint', async function () {
    const { browser, idToken } = await walk.signedIn('rp-logout-modified');
    // ChangeIdTokenToAlgNone: the same claims, alg none, no signature.
    const [, payload] = idToken.split('.');
    const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${payload}.`;
    const page = await walk.endSession(browser, {
      id_token_hint: unsigned,
      post_logout_redirect_uri: POST_LOGOUT,
      state: longState(),
    });
    walk.expectNoRedirect(page);
    expect(page.status).to.equal(400);
    expect(page.body).to.contain('id_token_hint');
  });

  it('oidcc-rp-initiated-logout-no-id-token-hint', async function () {
    const { browser } = await walk.signedIn('rp-logout-no-hint');
    const page = await walk.endSession(browser, { post_logout_redirect_uri: POST_LOGOUT, state: longState() });
    walk.expectNoRedirect(page);
    // An error page, or the OP's own confirmation (OIDC RP-Initiated Logout §2: it cannot tell whose logout it is).
    expect(page.status === 400 || page.body?.includes('name="logout"'), page.body).to.equal(true);
  });

  it('oidcc-rp-initiated-logout-no-params', async function () {
    const { browser } = await walk.signedIn('rp-logout-no-params');
    const done = await walk.confirm(browser, await walk.endSession(browser, {}));
    walk.expectNoRedirect(done);
    expect(done.status, 'the logged-out page').to.equal(200);
    await walk.expectLoggedOut(browser);
  });

  it('oidcc-rp-initiated-logout-no-post-logout-redirect-uri', async function () {
    const { browser, idToken } = await walk.signedIn('rp-logout-no-uri');
    const done = await walk.confirm(
      browser,
      await walk.endSession(browser, { id_token_hint: idToken, state: longState() }),
    );
    walk.expectNoRedirect(done);
    expect(done.status, 'the logged-out page').to.equal(200);
    await walk.expectLoggedOut(browser);
  });

  it('oidcc-rp-initiated-logout-no-state', async function () {
    const { browser, idToken } = await walk.signedIn('rp-logout-no-state');
    const confirmation = await walk.endSession(browser, {
      id_token_hint: idToken,
      post_logout_redirect_uri: POST_LOGOUT,
    });
    // CheckNoPostLogoutState: back at the RP without any state.
    walk.expectPostLogoutRedirect(await walk.confirm(browser, confirmation));
    await walk.expectLoggedOut(browser);
  });

  it('oidcc-rp-initiated-logout-only-state', async function () {
    const { browser } = await walk.signedIn('rp-logout-only-state');
    const done = await walk.confirm(browser, await walk.endSession(browser, { state: longState() }));
    walk.expectNoRedirect(done);
    expect(done.status, 'the logged-out page').to.equal(200);
    await walk.expectLoggedOut(browser);
  });
});

/**
 * The OpenID Foundation's `oidcc-backchannel-rp-initiated-logout-certification-test-plan`
 * (discovery, client_secret_basic, default response mode, static client registered with a
 * backchannel_logout_uri and backchannel_logout_session_required, as the suite asks): one test per
 * module. The back-channel logout request is received by a listener of the test and checked as
 * the module checks it (OIDCBCL §2.4, §2.5).
 */
describe('oidcc-backchannel-rp-initiated-logout-certification-test-plan (discovery, client_secret_basic, static client)', function () {
  let walk: LogoutWalk;
  let receiver: LogoutReceiver;

  before(async function () {
    const { server, idp } = await withSignInServer();
    receiver = new LogoutReceiver();
    const rp = await conformanceClient(server, 'oidcc-backchannel-logout-rp', 'client_secret_basic', {
      postLogoutRedirectUris: [POST_LOGOUT],
      backchannelLogoutUri: await receiver.start(),
      backchannelLogoutSessionRequired: true,
    });
    walk = new LogoutWalk(server, idp, rp);
  });
  after(async function () {
    await receiver?.close();
  });

  it('oidcc-backchannel-logout-discovery-endpoint-verification', function () {
    expect(walk.metadata).to.include({
      backchannel_logout_supported: true,
      backchannel_logout_session_supported: true,
    });
    expect(walk.metadata.end_session_endpoint).to.be.a('string');
  });

  it('oidcc-backchannel-rp-initiated-logout', async function () {
    const { browser, idToken } = await walk.signedIn('backchannel-logout');
    const before = receiver.received.length;
    const state = longState();
    const confirmation = await walk.endSession(browser, {
      id_token_hint: idToken,
      post_logout_redirect_uri: POST_LOGOUT,
      state,
    });
    walk.expectPostLogoutRedirect(await walk.confirm(browser, confirmation), state);

    // ExtractLogoutTokenFromBackchannelLogoutRequest, CheckForUnexpectedParametersInBackchannelLogoutRequest.
    await receiver.tokensReceived(before + 1);
    const request = receiver.received[before]!;
    expect(request.contentType).to.contain('application/x-www-form-urlencoded');
    expect([...request.form.keys()]).to.deep.equal(['logout_token']);
    const logoutToken = request.form.get('logout_token')!;
    // ValidateLogoutTokenSignature, ValidateLogoutTokenClaims.
    const { payload } = await jwtVerify(logoutToken, createRemoteJWKSet(new URL(walk.metadata.jwks_uri!)), {
      issuer: walk.metadata.issuer,
      audience: walk.rp.clientId,
      requiredClaims: ['iat', 'jti'],
    });
    expect(decodeProtectedHeader(logoutToken).typ).to.equal('logout+jwt');
    expect(payload.events).to.deep.equal({ [BACK_CHANNEL_LOGOUT_EVENT]: {} });
    // CheckIdTokenSubMatchesLogoutToken, CheckIdTokenSidMatchesLogoutToken, CheckLogoutTokenNoNonce, CheckLogoutTokenHasSubOrSid.
    const session = decodeJwt(idToken);
    expect(payload.sub).to.equal(session.sub);
    expect(payload.sid).to.be.a('string').and.equal(session.sid);
    expect(payload).not.to.have.property('nonce');

    await walk.expectLoggedOut(browser);
  });
});
