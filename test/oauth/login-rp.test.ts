import { expect } from 'chai';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  passDevIdpForms,
  registerPublicClient,
  withSignInServer,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import type { TestServer } from '../support/server.js';

/**
 * Sign-in with openid-client as the relying party: discovery, PKCE S256, the code grant
 * and UserInfo against Arbiter, while a fetch-based user agent walks the redirects and the
 * development IdP's login and consent forms.
 */
describe('Sign-in with openid-client as the relying party', () => {
  const REDIRECT_URI = 'http://127.0.0.1:1/rp/callback';
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let rp: TestClient;
  let configuration: client.Configuration;

  before(async () => {
    ({ server, idp } = await withSignInServer());
    rp = await registerPublicClient(server, REDIRECT_URI);
    configuration = await client.discovery(new URL(server.config.issuer), rp.clientId, undefined, client.None(), {
      execute: [client.allowInsecureRequests],
    });
  });

  /** Runs the browser part of a sign-in and returns what arrives at the redirect_uri. */
  async function signIn(parameters: Record<string, string>, login = 'alice'): Promise<URL> {
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(
      client.buildAuthorizationUrl(configuration, parameters),
      arrivingAt(REDIRECT_URI),
    );
    expect(loginPage.url.host, "the login form is the dev IdP's").to.equal(idp.host);
    return (await passDevIdpForms(agent, loginPage, login, arrivingAt(REDIRECT_URI))).url;
  }

  async function pkce() {
    const codeVerifier = client.randomPKCECodeVerifier();
    return {
      codeVerifier,
      parameters: {
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      },
    };
  }

  it('completes discovery, authorization with PKCE S256 and the code grant, with an ID token for the upstream subject', async () => {
    const counted = async () => {
      const text = await (await server.request('/metrics')).text();
      const series = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      return {
        signIns: series('arbiter_sign_ins_total\\{outcome="success"\\}'),
        codes: series('arbiter_tokens_issued_total\\{grant_type="authorization_code"\\}'),
      };
    };
    const before = await counted();
    const { codeVerifier, parameters } = await pkce();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const redirect = await signIn({
      redirect_uri: REDIRECT_URI,
      scope: 'openid profile email',
      state,
      nonce,
      ...parameters,
    });

    const tokens = await client.authorizationCodeGrant(configuration, redirect, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
      expectedNonce: nonce,
      idTokenExpected: true,
    });

    expect(tokens.token_type.toLowerCase()).to.equal('bearer');
    expect(tokens.scope?.split(' ')).to.include.members(['openid', 'profile', 'email']);
    const idToken = tokens.claims()!;
    expect(idToken).to.include({ iss: server.config.issuer, sub: 'alice', nonce });
    expect([idToken.aud].flat()).to.include(rp.clientId);
    const after = await counted();
    expect(after.signIns - before.signIns, 'the sign-in is counted').to.equal(1);
    expect(after.codes - before.codes, 'the code grant is counted').to.equal(1);
  });

  it('reads the profile from UserInfo', async () => {
    const { codeVerifier, parameters } = await pkce();
    const state = client.randomState();
    const redirect = await signIn(
      { redirect_uri: REDIRECT_URI, scope: 'openid profile email', state, ...parameters },
      'bob',
    );
    const tokens = await client.authorizationCodeGrant(configuration, redirect, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
    });

    const userinfo = await client.fetchUserInfo(configuration, tokens.access_token, 'bob');

    expect(userinfo).to.deep.equal({
      sub: 'bob',
      name: 'Bob',
      preferred_username: 'bob',
      email: 'bob@example.test',
      email_verified: true,
    });
  });

  it('releases only the claims of the granted scopes', async () => {
    const { codeVerifier, parameters } = await pkce();
    const state = client.randomState();
    const redirect = await signIn({ redirect_uri: REDIRECT_URI, scope: 'openid email', state, ...parameters }, 'carol');
    const tokens = await client.authorizationCodeGrant(configuration, redirect, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
    });

    expect(await client.fetchUserInfo(configuration, tokens.access_token, 'carol')).to.deep.equal({
      sub: 'carol',
      email: 'carol@example.test',
      email_verified: true,
    });
  });

  it('sends the user upstream with state, nonce and PKCE S256, forwarding prompt and login_hint', async () => {
    const { parameters } = await pkce();
    const agent = new FetchUserAgent();
    const authorize = client.buildAuthorizationUrl(configuration, {
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      state: 's',
      prompt: 'login',
      login_hint: 'dave',
      ...parameters,
    });

    const upstream = (await agent.navigate(authorize, (url) => url.host === idp.host)).url;

    expect(upstream.pathname).to.equal('/auth');
    const query = Object.fromEntries(upstream.searchParams);
    expect(query).to.include({
      client_id: 'arbiter',
      response_type: 'code',
      redirect_uri: `${server.config.issuer}/idp/callback/${idp.idpId}`,
      scope: 'openid profile email',
      code_challenge_method: 'S256',
      prompt: 'login',
      login_hint: 'dave',
    });
    expect(query.state).to.match(/^[\w-]{32,}$/);
    expect(query.nonce).to.match(/^[\w-]{32,}$/);
    expect(query.code_challenge).to.match(/^[\w-]{43}$/);
  });
});
