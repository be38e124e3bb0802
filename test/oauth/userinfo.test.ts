import { expect } from 'chai';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, registerPublicClient, withSignInServer } from '../support/dev-idp.js';
import { basic, clientCredentials, confidentialClient, postForm } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';

/**
 * GET/POST /userinfo (spec: UserInfo; Errors). A Bearer access token with `openid` and a user
 * answers the subject's claims; every refused call is 401 with `WWW-Authenticate: Bearer
 * error="invalid_token"` and a JSON `{error: "invalid_token", error_description}`, whatever
 * was wrong: no token, an unknown or revoked one, a token without `openid`, a
 * client_credentials token (no user), an Authorization header of another scheme.
 */
describe('UserInfo', () => {
  const REDIRECT_URI = 'http://127.0.0.1:1/userinfo-rp/callback';
  const insecure = { execute: [client.allowInsecureRequests] };
  let server: TestServer;
  let spa: client.Configuration;

  before(async () => {
    ({ server } = await withSignInServer());
    const registered = await registerPublicClient(server, REDIRECT_URI);
    spa = await client.discovery(
      new URL(server.config.issuer),
      registered.clientId,
      undefined,
      client.None(),
      insecure,
    );
  });

  /** Signs `login` in at the dev IdP with PKCE S256 and `scope`; returns the code grant's form (not yet redeemed). */
  async function signIn(scope: string, login = 'alice'): Promise<Record<string, string>> {
    const codeVerifier = client.randomPKCECodeVerifier();
    const url = client.buildAuthorizationUrl(spa, {
      redirect_uri: REDIRECT_URI,
      scope,
      state: 's',
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
    });
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(url, arrivingAt(REDIRECT_URI));
    const redirect = (await passDevIdpForms(agent, loginPage, login, arrivingAt(REDIRECT_URI))).url;
    const code = redirect.searchParams.get('code');
    expect(code, redirect.href).to.be.a('string');
    return {
      grant_type: 'authorization_code',
      code: code!,
      redirect_uri: REDIRECT_URI,
      client_id: spa.clientMetadata().client_id,
      code_verifier: codeVerifier,
    };
  }

  async function accessToken(scope: string, login = 'alice'): Promise<string> {
    const { status, body } = await postForm(server, '/token', await signIn(scope, login));
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.scope.split(' ').sort()).to.deep.equal(scope.split(' ').sort());
    return body.access_token;
  }

  async function userinfo(
    init: RequestInit = {},
    query = '',
  ): Promise<{ status: number; body: any; headers: Headers }> {
    const response = await server.request(`/userinfo${query}`, init);
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
  }

  const bearer = (token: string): RequestInit => ({ headers: { Authorization: `Bearer ${token}` } });

  /** The spec's refusal: 401, a Bearer challenge with error="invalid_token", and the JSON error body. */
  function expectRefused(answer: { status: number; body: any; headers: Headers }, description?: RegExp): void {
    expect(answer.status, JSON.stringify(answer.body)).to.equal(401);
    const challenge = answer.headers.get('www-authenticate') ?? '';
    expect(challenge).to.match(/^Bearer (realm="[^"]*", )?error="invalid_token"/);
    expect(challenge).not.to.match(/insufficient_scope|invalid_request/);
    expect(answer.body).to.have.keys('error', 'error_description');
    expect(answer.body.error).to.equal('invalid_token');
    expect(answer.body.error_description).to.be.a('string').and.not.equal('');
    if (description) expect(answer.body.error_description).to.match(description);
    expect(answer.headers.get('cache-control')).to.equal('no-store');
  }

  describe('answers a token with openid and a user', () => {
    it('with the claims of the granted scopes (GET and POST)', async () => {
      const token = await accessToken('openid profile email');

      const viaGet = await userinfo(bearer(token));
      expect(viaGet.status, JSON.stringify(viaGet.body)).to.equal(200);
      expect(viaGet.body).to.deep.equal({
        sub: 'alice',
        name: 'Alice',
        preferred_username: 'alice',
        email: 'alice@example.test',
        email_verified: true,
      });

      const viaPost = await userinfo({ method: 'POST', ...bearer(token) });
      expect(viaPost.status).to.equal(200);
      expect(viaPost.body).to.deep.equal(viaGet.body);
    });

    it('with sub alone for openid alone, and email claims for email', async () => {
      expect((await userinfo(bearer(await accessToken('openid', 'dora')))).body).to.deep.equal({ sub: 'dora' });
      expect((await userinfo(bearer(await accessToken('openid email', 'erin')))).body).to.deep.equal({
        sub: 'erin',
        email: 'erin@example.test',
        email_verified: true,
      });
    });
  });

  it('refuses a token sent in the header and the body at once with 400 invalid_request (RFC 6750 §2, §3.1)', async () => {
    const token = await accessToken('openid');
    const answer = await userinfo({
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ access_token: token }).toString(),
    });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
    expect(answer.body.error).to.equal('invalid_request');
    expect(answer.headers.get('www-authenticate')).to.match(/^Bearer error="invalid_request"/);
  });

  describe('refuses with 401 invalid_token', () => {
    it('a call without a token (GET and POST)', async () => {
      expectRefused(await userinfo());
      expectRefused(await userinfo({ method: 'POST' }));
    });

    it('a Bearer value that is no token', async () => {
      expectRefused(await userinfo(bearer('not-a-token')));
      expectRefused(await userinfo({ headers: { Authorization: 'Bearer' } }));
    });

    it('a Basic Authorization header (client credentials are not a UserInfo credential)', async () => {
      const secret = await confidentialClient(server, 'userinfo-basic', { scopes: ['read'] });
      expectRefused(await userinfo({ headers: { Authorization: basic('userinfo-basic', secret) } }));
      expectRefused(await userinfo({ method: 'POST', headers: { Authorization: basic('userinfo-basic', secret) } }));
    });

    it('an access token in the query string', async () => {
      expectRefused(await userinfo({}, `?access_token=${encodeURIComponent(await accessToken('openid'))}`));
    });

    it('a client_credentials token, which has no user', async () => {
      const secret = await confidentialClient(server, 'userinfo-svc', { scopes: ['read'] });
      const issued = await clientCredentials(server, 'userinfo-svc', secret, { scope: 'read' });
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);

      expectRefused(await userinfo(bearer(issued.body.access_token)));
    });

    it('a user token without openid', async () => {
      const token = await accessToken('profile email');

      expectRefused(await userinfo(bearer(token)), /openid/);
      expectRefused(await userinfo({ method: 'POST', ...bearer(token) }), /openid/);
    });

    it('a revoked token (its code was used a second time)', async () => {
      const form = await signIn('openid profile');
      const first = await postForm(server, '/token', form);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect((await userinfo(bearer(first.body.access_token))).status).to.equal(200);

      expect((await postForm(server, '/token', form)).status, 'the code is single use').to.equal(400);

      expectRefused(await userinfo(bearer(first.body.access_token)));
    });

    it('and records the refusal in the audit log as a deny', async () => {
      await userinfo({ headers: { Authorization: 'Basic dXNlcjpwYXNz', 'User-Agent': 'userinfo-audit-probe' } });
      const page = await server.admin('GET', '/audit-logs?endpoint=/userinfo&size=20&sort=id,desc');
      const entry = (page.body.content as any[]).find((candidate) => candidate.userAgent === 'userinfo-audit-probe');
      expect(entry, 'audit entry').to.be.an('object');
      expect(entry.outcome).to.equal('deny');
      expect(entry.requestSummary).to.include({ status: 401, error: 'invalid_token' });
    });
  });
});
