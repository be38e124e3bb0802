import { expect } from 'chai';
import { FetchUserAgent, type Page } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerIdentityProvider,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { clientCredentials, confidentialClient } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * How the upstream provider is chosen, and every way a sign-in can fail: each failure that
 * belongs to an authorization request reaches the client as error + state at its
 * redirect_uri; requests that belong to none are a 400, never a 500.
 */
describe('Sign-in: choosing the upstream provider, and failures', () => {
  const REDIRECT_URI = 'http://127.0.0.1:1/failures/callback';
  let server: TestServer;
  let primary: RegisteredDevIdp;
  let secondary: RegisteredDevIdp;
  let spa: TestClient;

  before(async () => {
    // Its own server: it registers several identity providers in the default tenant, and chooses among them.
    server = await readyServer();
    primary = await startRegisteredDevIdp(server, { idpId: 'primary' });
    secondary = await startRegisteredDevIdp(server, { idpId: 'secondary' });
    // The primary IdP once more, with a secret it does not know: its code exchange fails.
    await registerIdentityProvider(server, primary.issuer, {
      idpId: 'wrong-secret',
      clientSecret: 'not-the-secret',
      fields: { sharedCallback: true },
    });
    spa = await registerPublicClient(server, REDIRECT_URI);
  });

  after(async () => {
    await primary?.close();
    await secondary?.close();
    await server?.close();
  });

  const atClient = arrivingAt(REDIRECT_URI);
  const atAnyIdp = (url: URL) => url.host === primary.host || url.host === secondary.host;

  /** Follows the authorization request until it is about to leave for an IdP or the client. */
  async function firstStop(extra: Record<string, string> = {}, agent = new FetchUserAgent(), client = spa) {
    const request = await authorizationRequest(server, client, extra);
    const page = await agent.navigate(request.url, (url) => atAnyIdp(url) || atClient(url));
    return { request, page, agent };
  }

  /** Signs in at the dev IdP the request went to and returns the page the journey stopped at. */
  async function throughDevIdp(
    extra: Record<string, string>,
    stopAt = atClient,
  ): Promise<{ page: Page; state: string; agent: FetchUserAgent }> {
    const agent = new FetchUserAgent();
    const request = await authorizationRequest(server, spa, extra);
    const loginPage = await agent.navigate(request.url, stopAt);
    return { page: await passDevIdpForms(agent, loginPage, 'ivan', stopAt), state: request.state, agent };
  }

  describe('choosing the provider', () => {
    it('sends the user to the first enabled provider when the client names none', async () => {
      const { page } = await firstStop();
      expect(page.url.host).to.equal(primary.host);
    });

    it('sends the user to the provider named by upstream_idp', async () => {
      const { page } = await firstStop({ upstream_idp: 'secondary' });
      expect(page.url.host).to.equal(secondary.host);
    });

    it('skips disabled providers (per tenant)', async () => {
      const tenantId = 'two-idps';
      await registerIdentityProvider(server, primary.issuer, { idpId: 'off', tenantId, enabled: false });
      await registerIdentityProvider(server, secondary.issuer, { idpId: 'on', tenantId });
      const client = await registerPublicClient(server, REDIRECT_URI, { tenantId });

      const { page } = await firstStop(
        {},
        new FetchUserAgent({ [new URL(server.config.issuer).host]: { 'X-Tenant-Id': tenantId } }),
        client,
      );

      expect(page.url.host).to.equal(secondary.host);
    });
  });

  describe('failures reported to the client', () => {
    it('upstream_idp naming no enabled provider: invalid_request with the state', async () => {
      const { request, page } = await firstStop({ upstream_idp: 'nobody' });
      expect(atClient(page.url)).to.equal(true);
      expect(page.url.searchParams.get('error')).to.equal('invalid_request');
      expect(page.url.searchParams.get('state')).to.equal(request.state);
    });

    it('a tenant without an identity provider: temporarily_unavailable with the state', async () => {
      const tenantId = 'no-idp';
      const client = await registerPublicClient(server, REDIRECT_URI, { tenantId });
      const agent = new FetchUserAgent({ [new URL(server.config.issuer).host]: { 'X-Tenant-Id': tenantId } });

      const { request, page } = await firstStop({}, agent, client);

      expect(atClient(page.url)).to.equal(true);
      expect(page.url.searchParams.get('error')).to.equal('temporarily_unavailable');
      expect(page.url.searchParams.get('error_description')).to.match(/no upstream identity provider/);
      expect(page.url.searchParams.get('state')).to.equal(request.state);
    });

    it('a code exchange the upstream refuses: access_denied with the state, and nobody signed in', async () => {
      const { page, state } = await throughDevIdp({ upstream_idp: 'wrong-secret' });

      expect(page.url.searchParams.get('error')).to.equal('access_denied');
      expect(page.url.searchParams.get('state')).to.equal(state);
      const subjects = (await server.admin('GET', '/subjects')).body as { subjectId: string }[];
      expect(subjects.map((subject) => subject.subjectId)).not.to.include('ivan');
    });
  });

  describe('callbacks and interactions that belong to no sign-in', () => {
    it('a callback with an unknown state is a 400 with a JSON error', async () => {
      const response = await server.request('/idp/callback?code=abc&state=unknown-state');
      expect(response.status).to.equal(400);
      expect(await response.json()).to.include({ error: 'invalid_request' });
    });

    it('a callback without state is a 400', async () => {
      const response = await server.request('/idp/callback?code=abc');
      expect(response.status).to.equal(400);
    });

    it('a replayed callback is refused with a 400 after the first one signed the user in', async () => {
      const { page: callback, agent } = await throughDevIdp({}, (url) => url.pathname.startsWith('/idp/callback'));

      const first = await agent.navigate(callback.url, atClient);
      const replay = await agent.navigate(callback.url, atClient);

      expect(first.url.searchParams.get('code')).to.be.a('string');
      expect(replay.status).to.equal(400);
      expect(JSON.parse(replay.body!).error_description).to.match(/unknown, expired, already completed/);
    });

    it('keeps one pending upstream sign-in per interaction, however often its page is loaded', async () => {
      const agent = new FetchUserAgent();
      const request = await authorizationRequest(server, spa);
      const interaction = await agent.navigate(request.url, (url) => url.pathname.startsWith('/interaction/'));
      // Each load sends the browser upstream again, with a state of its own.
      for (let load = 0; load < 5; load += 1)
        expect((await agent.navigate(interaction.url, atAnyIdp)).url.host).to.equal(primary.host);
      const uid = interaction.url.pathname.split('/')[2]!;
      const logins = await server.store.collection('upstream_logins', '_default').find({ uid });
      expect(logins.map((login) => (login as { status?: string }).status)).to.deep.equal(['pending']);
    });

    it('an interaction page without its cookie is a 400', async () => {
      const { page } = await throughDevIdp({}, (url) => url.pathname.endsWith('/upstream-done'));

      const response = await server.request(page.url.pathname);

      expect(response.status).to.equal(400);
      expect(await response.json()).to.include({ error: 'invalid_request' });
    });
  });

  describe('prompts passed upstream', () => {
    it('prompt=consent is forwarded upstream; Arbiter settles its own consent without a screen', async () => {
      const agent = new FetchUserAgent();
      const request = await authorizationRequest(server, spa, { prompt: 'consent' });
      const upstream = await agent.navigate(request.url, atAnyIdp);
      expect(upstream.url.searchParams.get('prompt')).to.equal('consent');

      const loginPage = await agent.navigate(upstream.url, atClient);
      const back = await passDevIdpForms(agent, loginPage, 'judy', atClient);

      expect(back.url.searchParams.get('state')).to.equal(request.state);
      const arbiterPrompts = agent.visited.filter(
        (url) => url.origin === server.config.issuer && /^\/interaction\/[^/]+$/.test(url.pathname),
      );
      expect(arbiterPrompts, 'a login and a consent interaction').to.have.length(2);
      const { status } = await redeemCode(server, spa, back.url.searchParams.get('code')!, request.codeVerifier);
      expect(status).to.equal(200);
    });

    it('prompt=select_account is accepted and forwarded upstream, even for a signed-in user', async () => {
      const agent = new FetchUserAgent();
      const signIn = await authorizationRequest(server, spa);
      await passDevIdpForms(agent, await agent.navigate(signIn.url, atClient), 'kim', atClient);

      const request = await authorizationRequest(server, spa, { prompt: 'select_account' });
      const upstream = await agent.navigate(request.url, (url) => atAnyIdp(url) || atClient(url));

      expect(upstream.url.host).to.equal(primary.host);
      expect(upstream.url.searchParams.get('prompt')).to.equal('select_account');
    });
  });

  describe('UserInfo refusals', () => {
    async function userinfo(authorization?: string) {
      return fetch(`${server.config.issuer}/userinfo`, { headers: authorization ? { authorization } : {} });
    }

    function expectInvalidToken(response: Response) {
      expect(response.status).to.equal(401);
      expect(response.headers.get('www-authenticate')).to.match(/^Bearer .*error="invalid_token"/);
    }

    it('no token: 401 with Bearer error="invalid_token"', async () => {
      expectInvalidToken(await userinfo());
    });

    it('an unknown token: 401 with Bearer error="invalid_token"', async () => {
      expectInvalidToken(await userinfo('Bearer not-a-token'));
    });

    it('a client_credentials token (no user): 401 with Bearer error="invalid_token"', async () => {
      const secret = await confidentialClient(server, 'machine', { scopes: ['read'] });
      const issued = await clientCredentials(server, 'machine', secret, { scope: 'read' });
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);

      expectInvalidToken(await userinfo(`Bearer ${issued.body.access_token}`));
    });
  });
});
