import { expect } from 'chai';
import * as client from 'openid-client';
import { withSignInServer, type RegisteredDevIdp } from '../support/dev-idp.js';
import {
  Browser,
  CALLBACK,
  conformanceClient,
  redeem,
  responseParameters,
  type Authorization,
  type ConformanceClient,
} from '../support/relying-party.js';
import type { TestServer } from '../support/server.js';

/**
 * OpenID Connect's authorization request parameters beyond the code flow itself (README,
 * "OpenID Connect requests"): the claims parameter, id_token_hint, prompt, max_age and acr
 * against the upstream sign-in, form_post, POST to the authorization endpoint, UserInfo's token
 * in the body. The happy paths of the conformance plan are in test/conformance; here are the
 * hostile and the edge cases. (A claim of a scope the policy refuses: test/oauth/exact-grants.test.ts.)
 */
describe('OpenID Connect requests', () => {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let rp: ConformanceClient;
  let people = 0;

  const browser = () => new Browser(idp, `oidc-requests-${(people += 1)}`);

  before(async () => {
    ({ server, idp } = await withSignInServer());
    rp = await conformanceClient(server, 'oidc-requests-rp');
  });

  async function signedIn(agent = browser()) {
    const authorization = await agent.authorize(rp);
    const tokens = await redeem(rp, authorization);
    return { agent, tokens, idToken: tokens.claims()! };
  }

  async function errorOf(authorization: Authorization): Promise<Record<string, string>> {
    return Object.fromEntries(await responseParameters(authorization));
  }

  const claims = (request: object) => ({ claims: JSON.stringify(request) });

  describe('the claims parameter', () => {
    it('puts the claims asked for into the ID token, and only those into UserInfo that were asked for there', async () => {
      const agent = browser();
      const authorization = await agent.authorize(rp, claims({ id_token: { email: null, name: { essential: true } } }));
      const tokens = await redeem(rp, authorization);

      expect(tokens.claims()).to.include({ email: `${agent.login}@example.test`, name: capitalized(agent.login) });
      expect(tokens.claims()).not.to.have.property('preferred_username');
      expect(tokens.scope).to.equal('openid');
      expect(await client.fetchUserInfo(rp.configuration, tokens.access_token, agent.login)).to.deep.equal({
        sub: agent.login,
      });
    });

    it('puts the scopes that carry the claims before the policy, and keeps them out of the token', async () => {
      const agent = browser();
      const tokens = await redeem(rp, await agent.authorize(rp, claims({ userinfo: { email_verified: null } })));

      const entries = (await server.admin('GET', '/audit-logs?size=20&sort=id,desc')).body.content as any[];
      const decision = entries.find(
        (entry) =>
          entry.clientId === rp.clientId && entry.policyInput?.request?.parameters?.claims?.includes('email_verified'),
      );
      expect(decision.policyInput.request.scopes).to.deep.equal(['openid', 'email']);
      expect(tokens.scope).to.equal('openid');
      expect(await client.fetchUserInfo(rp.configuration, tokens.access_token, agent.login)).to.deep.equal({
        sub: agent.login,
        email_verified: true,
      });
    });

    it('releases a claim asked for with a value or values only when it has one of them', async () => {
      const agent = browser();
      const request = {
        userinfo: {
          email: { value: 'someone-else@example.test' },
          name: { values: ['Nobody', capitalized(agent.login)] },
        },
      };
      const tokens = await redeem(rp, await agent.authorize(rp, { scope: 'openid profile email', ...claims(request) }));

      const answer = await client.fetchUserInfo(rp.configuration, tokens.access_token, agent.login);

      expect(answer).to.include({ name: capitalized(agent.login), preferred_username: agent.login });
      expect(answer, 'not the email that was asked for').not.to.have.property('email');
    });

    it('puts auth_time into the ID token when it is asked for as essential', async () => {
      const tokens = await redeem(
        rp,
        await browser().authorize(rp, claims({ id_token: { auth_time: { essential: true } } })),
      );

      expect(tokens.claims()!.auth_time).to.be.a('number');
    });

    it('refuses a claims parameter that is not a JSON object of userinfo and id_token objects (invalid_request)', async () => {
      for (const value of ['not json', '[]', '{}', '{"userinfo":[]}', '{"id_token":{"email":true}}']) {
        const authorization = await browser().authorize(rp, { claims: value });

        expect(await errorOf(authorization), value).to.include({
          error: 'invalid_request',
          state: authorization.state,
        });
      }
    });

    it("answers login_required for another person's sub value with prompt=none, and after a sign-in as someone else", async () => {
      const { agent } = await signedIn();
      const elsewhere = claims({ id_token: { sub: { value: 'oidc-requests-somebody-else' } } });

      const silent = await agent.authorize(rp, { prompt: 'none', ...elsewhere });
      const interactive = await agent.authorize(rp, elsewhere);

      expect(await errorOf(silent)).to.include({ error: 'login_required', state: silent.state });
      expect(interactive.upstreamRequests[0]!.searchParams.get('prompt'), 'a fresh sign-in upstream').to.equal('login');
      expect(await errorOf(interactive)).to.include({ error: 'login_required', state: interactive.state });
    });
  });

  describe('id_token_hint', () => {
    it("answers login_required for another person's ID token with prompt=none", async () => {
      const other = await signedIn();
      const { agent } = await signedIn();

      const authorization = await agent.authorize(rp, { prompt: 'none', id_token_hint: other.tokens.id_token! });

      expect(await errorOf(authorization)).to.include({ error: 'login_required', state: authorization.state });
    });

    it("sends the user upstream again for another person's ID token, and completes for that person", async () => {
      const other = await signedIn();
      const { agent } = await signedIn();
      agent.login = other.agent.login;

      const authorization = await agent.authorize(rp, { id_token_hint: other.tokens.id_token! });

      expect(authorization.upstreamRequests[0]!.searchParams.get('prompt')).to.equal('login');
      expect((await redeem(rp, authorization)).claims()!.sub).to.equal(other.idToken.sub);
    });

    it("refuses a hint that is not this server's ID token for this client (invalid_request)", async () => {
      const { agent, tokens } = await signedIn();
      const otherRp = await conformanceClient(server, 'oidc-requests-other-rp');
      const othersToken = (await redeem(otherRp, await agent.authorize(otherRp))).id_token!;
      const [header, payload] = tokens.id_token!.split('.');
      const forged = `${header}.${payload}.${Buffer.from('not the signature').toString('base64url')}`;

      for (const hint of ['garbage', forged, othersToken]) {
        const authorization = await agent.authorize(rp, { prompt: 'none', id_token_hint: hint });
        expect(await errorOf(authorization), hint).to.include({ error: 'invalid_request', state: authorization.state });
      }
    });
  });

  describe('prompt and max_age', () => {
    it('prompt=consent is answered by the policy, without a screen and without the upstream', async () => {
      const { agent, idToken } = await signedIn();

      const authorization = await agent.authorize(rp, { prompt: 'consent' });

      expect(authorization.upstreamRequests).to.deep.equal([]);
      expect((await redeem(rp, authorization)).claims()!.sub).to.equal(idToken.sub);
    });

    it('passes max_age upstream without a session, and asks for no fresh sign-in there', async () => {
      const authorization = await browser().authorize(rp, { max_age: '600' });

      const upstream = authorization.upstreamRequests[0]!.searchParams;
      expect(upstream.get('max_age')).to.equal('600');
      expect(upstream.has('prompt')).to.equal(false);
      expect((await redeem(rp, authorization, { maxAge: 600 })).claims()!.auth_time).to.be.a('number');
    });
  });

  describe('acr', () => {
    it("passes acr_values upstream and repeats the upstream's acr in the ID token", async () => {
      const authorization = await browser().authorize(rp, { acr_values: 'urn:example:loa:2 urn:example:loa:1' });

      expect(authorization.upstreamRequests[0]!.searchParams.get('acr_values')).to.equal(
        'urn:example:loa:2 urn:example:loa:1',
      );
      expect((await redeem(rp, authorization)).claims()!.acr).to.equal('urn:example:loa:2');
    });

    it('puts no acr into the ID token when the upstream states none', async () => {
      const { idToken } = await signedIn();

      expect(idToken).not.to.have.property('acr');
    });

    it('completes an essential acr the upstream reached, and refuses one it did not (unmet_authentication_requirements)', async () => {
      const essential = claims({ id_token: { acr: { essential: true, values: ['urn:example:loa:3'] } } });

      const reached = await browser().authorize(rp, essential);
      const missed = await browser().authorize(rp, { acr_values: 'urn:example:loa:1', ...essential });

      expect((await redeem(rp, reached)).claims()!.acr).to.equal('urn:example:loa:3');
      expect(missed.upstreamRequests[0]!.searchParams.get('acr_values')).to.equal(
        'urn:example:loa:1 urn:example:loa:3',
      );
      expect(await errorOf(missed)).to.include({ error: 'unmet_authentication_requirements', state: missed.state });
    });
  });

  describe('response_mode=form_post', () => {
    it('answers with a page that posts the code and state to the redirect_uri', async () => {
      expect(rp.configuration.serverMetadata().response_modes_supported).to.include('form_post');
      const authorization = await browser().authorize(rp, { response_mode: 'form_post' });

      expect(authorization.response).to.be.instanceOf(Request);
      expect(authorization.page.body).to.include(`action="${CALLBACK}"`);
      expect((await redeem(rp, authorization)).claims()!.sub).to.be.a('string');
    });

    it('posts errors too (prompt=none without a session)', async () => {
      const authorization = await browser().authorize(rp, { response_mode: 'form_post', prompt: 'none' });

      expect(authorization.response).to.be.instanceOf(Request);
      expect(await errorOf(authorization)).to.include({ error: 'login_required', state: authorization.state });
    });
  });

  describe('POST to the authorization endpoint', () => {
    it('is the same request as by GET: the session holds, prompt=none completes', async () => {
      const { agent, idToken } = await signedIn();

      const authorization = await agent.authorizeByPost(rp, { response_type: 'code', prompt: 'none' });

      expect(authorization.upstreamRequests).to.deep.equal([]);
      expect((await redeem(rp, authorization)).claims()!.sub).to.equal(idToken.sub);
    });

    it('refuses a body that is not a form, a parameter given twice, and more than a URL can carry (400 invalid_request)', async () => {
      const json = await server.request('/authorize', {
        method: 'POST',
        json: { client_id: rp.clientId, redirect_uri: CALLBACK, response_type: 'code' },
      });
      const twice = await server.request('/authorize', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `client_id=${rp.clientId}&scope=openid&scope=email&response_type=code`,
      });

      const huge = await server.request('/authorize', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          client_id: rp.clientId,
          response_type: 'code',
          extra: '{'.repeat(6000),
        }).toString(),
      });

      for (const answer of [json, twice, huge]) {
        expect(answer.status).to.equal(400);
        expect(answer.headers.get('location')).to.equal(null);
        expect(((await answer.json()) as { error: string }).error).to.equal('invalid_request');
      }
    });
  });

  describe('UserInfo', () => {
    it('refuses a token sent both in the header and in the body (RFC 6750 §2: one method only)', async () => {
      const { tokens } = await signedIn();

      const answer = await server.request('/userinfo', {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${tokens.access_token}`,
          'Content-Type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ access_token: tokens.access_token }).toString(),
      });

      // A malformed request (issue 39, point 6), not a bad token.
      expect(answer.status).to.equal(400);
      expect(answer.headers.get('www-authenticate')).to.match(/^Bearer .*error="invalid_request"/);
    });
  });
});

function capitalized(login: string): string {
  return login.charAt(0).toUpperCase() + login.slice(1);
}
