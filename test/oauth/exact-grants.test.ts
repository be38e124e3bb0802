import { expect } from 'chai';
import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, startRegisteredDevIdp, type RegisteredDevIdp } from '../support/dev-idp.js';
import { clientWithToken, policyInForce, postForm, updateOauthData } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

const REDIRECT_URI = 'http://127.0.0.1:1/exact/callback';
const API = 'https://api.exact.example.test/';
const PAYMENT = 'urn:example:payment';

/**
 * The client gets exactly what the policy granted at every step of the code flow: regression
 * tests for what a client could get beyond the decision (issue "only the policy decides").
 */
describe('Exact grants: the client gets what the policy granted, never more', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;

  before(async function () {
    // Its own server: the test changes the shared policy data and rules.
    server = await readyServer();
    idp = await startRegisteredDevIdp(server);
    // A client allowed read but not write: the default authorize policy drops write.
    await publicClient('exact-spa', ['openid', 'profile', 'email', 'read']);
    await updateOauthData(server, (data) => {
      data.rar_only_types = { [PAYMENT]: {} };
    });
  });
  after(async function () {
    await idp?.close();
    await server?.close();
  });

  /** A public client of the test's redirect URI, allowed `scopes`. */
  async function publicClient(clientId: string, scopes: string[]): Promise<void> {
    const created = await server.admin('POST', '/clients', {
      clientId,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [REDIRECT_URI],
      scopes,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
  }

  /** Signs in (or reuses the agent's session) and returns the code and its PKCE verifier. */
  async function authorize(
    agent: FetchUserAgent,
    parameters: Record<string, string>,
  ): Promise<{ code: string; verifier: string }> {
    const verifier = client.randomPKCECodeVerifier();
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: 'exact-spa',
      redirect_uri: REDIRECT_URI,
      state: client.randomState(),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      ...parameters,
    });
    const first = await agent.navigate(`${server.config.issuer}/authorize?${query}`, arrivingAt(REDIRECT_URI));
    const page = first.url.href.startsWith(REDIRECT_URI)
      ? first
      : await passDevIdpForms(agent, first, 'erin', arrivingAt(REDIRECT_URI));
    const code = page.url.searchParams.get('code');
    if (!code) throw new Error(`no code: ${page.url.href}`);
    return { code, verifier };
  }

  const redeem = (code: string, verifier: string, extra: Record<string, string> = {}) =>
    postForm(server, '/token', {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT_URI,
      client_id: 'exact-spa',
      code_verifier: verifier,
      ...extra,
    });
  const userinfo = async (token: string) =>
    (await server.request('/userinfo', { headers: { Authorization: `Bearer ${token}` } })).json() as Promise<any>;

  it('a scope the authorize decision dropped is in no code and no token, also with a resource', async function () {
    const { code, verifier } = await authorize(new FetchUserAgent(), { scope: 'openid read write', resource: API });
    // The decision is taken when the request resumes after sign-in, at /authorize/<uid>.
    const decision = (await server.admin('GET', '/audit-logs?size=100&sort=id,desc')).body.content.find(
      (entry: any) => entry.endpoint.startsWith('/authorize') && entry.policyDecision?.scopes,
    );
    expect(decision.policyDecision.scopes).to.deep.equal(['openid', 'read']);
    const { status, body } = await redeem(code, verifier, { resource: API });
    expect(status, JSON.stringify(body)).to.equal(200);
    const scopes = body.scope.split(' ');
    expect(scopes).to.include('read');
    expect(scopes).not.to.include('write');
  });

  it('a second sign-in in the same browser session gets its own grant; the first token keeps what it was issued', async function () {
    const agent = new FetchUserAgent();
    const first = await authorize(agent, { scope: 'openid email' });
    const firstTokens = (await redeem(first.code, first.verifier)).body;
    expect(firstTokens.scope.split(' ').sort()).to.deep.equal(['email', 'openid']);
    const before = await userinfo(firstTokens.access_token);
    expect(before).to.have.property('email');

    const second = await authorize(agent, { scope: 'openid profile' });
    const secondTokens = (await redeem(second.code, second.verifier)).body;
    expect(secondTokens.scope.split(' ').sort(), 'the second decision granted openid profile').to.deep.equal([
      'openid',
      'profile',
    ]);
    expect(await userinfo(secondTokens.access_token)).to.have.property('name');

    const after = await userinfo(firstTokens.access_token);
    expect(after, 'UserInfo of the first token is unchanged').to.deep.equal(before);
    const refreshed = await postForm(server, '/token', {
      grant_type: 'refresh_token',
      refresh_token: firstTokens.refresh_token,
      client_id: 'exact-spa',
    });
    expect(refreshed.body.scope.split(' ').sort(), 'and so is its refresh token').to.deep.equal(['email', 'openid']);
  });

  it('a claim the claims parameter names is released only under a scope the policy granted', async function () {
    await publicClient('exact-claims-spa', ['openid', 'email']);
    let before: unknown;
    // profile is then no scope this client may have: the default authorize policy refuses it.
    await updateOauthData(server, (data) => {
      before = data.oidc_scopes;
      data.oidc_scopes = ['openid', 'email'];
    });
    try {
      const claims = {
        userinfo: { name: null, email: null },
        id_token: { preferred_username: null, email_verified: null },
      };
      const { code, verifier } = await authorize(new FetchUserAgent(), {
        client_id: 'exact-claims-spa',
        scope: 'openid',
        claims: JSON.stringify(claims),
      });
      const decision = (await server.admin('GET', '/audit-logs?size=100&sort=id,desc')).body.content.find(
        (entry: any) => entry.clientId === 'exact-claims-spa' && entry.policyDecision?.scopes,
      );
      expect(decision.policyInput.request.scopes, 'the scopes of the claims asked for').to.have.members([
        'openid',
        'profile',
        'email',
      ]);
      expect(decision.policyDecision.scopes).to.have.members(['openid', 'email']);

      const { body } = await redeem(code, verifier, { client_id: 'exact-claims-spa' });

      expect(body.scope).to.equal('openid');
      const idToken = decodeJwt(body.id_token);
      expect(idToken).to.include({ email_verified: true });
      expect(idToken).not.to.have.property('preferred_username');
      expect(await userinfo(body.access_token)).to.deep.equal({ sub: 'erin', email: 'erin@example.test' });
    } finally {
      await updateOauthData(server, (data) => {
        data.oidc_scopes = before;
      });
    }
  });

  it('a claim the claims parameter named is withdrawn at the refresh once the policy no longer grants its scope', async function () {
    await publicClient('exact-claims-refresh', ['openid', 'profile', 'email']);
    const claims = { userinfo: { name: null, email: null }, id_token: { name: null, email: null } };
    const { code, verifier } = await authorize(new FetchUserAgent(), {
      client_id: 'exact-claims-refresh',
      scope: 'openid',
      claims: JSON.stringify(claims),
    });
    const redeemed = await redeem(code, verifier, { client_id: 'exact-claims-refresh' });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    const refresh = async (refreshToken: string) => {
      const answer = await postForm(server, '/token', {
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        client_id: 'exact-claims-refresh',
      });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      return answer.body;
    };
    const released = { sub: 'erin', name: 'Erin', email: 'erin@example.test' };
    const kept = await refresh(redeemed.body.refresh_token);
    expect(decodeJwt(kept.id_token), 'a refresh the policy still grants keeps them').to.include({
      name: 'Erin',
      email: 'erin@example.test',
    });
    expect(await userinfo(kept.access_token)).to.deep.equal(released);

    await updateOauthData(server, (data) => {
      data.clients = { ...data.clients, 'exact-claims-refresh': { withheld_scopes: ['email', 'profile'] } };
    });
    try {
      const withheld = await refresh(kept.refresh_token);
      expect(withheld.scope).to.equal('openid');
      const idToken = decodeJwt(withheld.id_token);
      expect(idToken).not.to.have.property('email');
      expect(idToken).not.to.have.property('name');
      expect(await userinfo(withheld.access_token)).to.deep.equal({ sub: 'erin' });
      expect(await userinfo(kept.access_token), 'a token issued before keeps what it was issued').to.deep.equal(
        released,
      );
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&clientId=exact-claims-refresh&size=1'))
        .body.content;
      expect(entry.policyInput.request.scopes, 'the scopes of the claims asked for again').to.have.members([
        'openid',
        'profile',
        'email',
      ]);
    } finally {
      await updateOauthData(server, (data) => {
        delete data.clients['exact-claims-refresh'];
      });
    }
  });

  it('RFC 9396 end to end: authorization_details alone → code → token with the granted details → introspection shows them', async function () {
    const details = [{ type: PAYMENT, instructedAmount: { currency: 'EUR', amount: '12.00' } }];
    const { code, verifier } = await authorize(new FetchUserAgent(), {
      authorization_details: JSON.stringify(details),
    });
    const { status, body } = await redeem(code, verifier);
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.authorization_details).to.deep.equal(details);
    const [decided] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
    expect(decided.policyDecision.authorization_details, 'what the token decision granted').to.deep.equal(details);
    const { token: caller } = await clientWithToken(server, 'exact-rs', ['introspection']);
    const introspected = await postForm(
      server,
      '/introspect',
      { token: body.access_token },
      { Authorization: `Bearer ${caller}` },
    );
    expect(introspected.body.active).to.equal(true);
    expect(introspected.body.authorization_details).to.deep.equal(details);
  });

  describe('authorization_details with scope (issue 23: RFC 9396 §3.1, the scopes policy data marks combinable)', function () {
    const details = [{ type: PAYMENT, instructedAmount: { currency: 'EUR', amount: '7.00' } }];
    /** The error an authorization request is redirected with before sign-in, or null when it goes on to sign-in. */
    const refusal = async (scope: string, extra: Record<string, string> = {}) => {
      const query = new URLSearchParams({
        response_type: 'code',
        client_id: 'exact-spa',
        redirect_uri: REDIRECT_URI,
        state: 'st',
        code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
        code_challenge_method: 'S256',
        scope,
        authorization_details: JSON.stringify(details),
        ...extra,
      });
      const response = await server.request(`/authorize?${query}`);
      const location = new URL(response.headers.get('location') ?? '/', server.config.issuer);
      return location.href.startsWith(REDIRECT_URI)
        ? { error: location.searchParams.get('error'), description: location.searchParams.get('error_description') }
        : null;
    };

    it('signs in with openid and authorization_details: an ID token, and an access token with the granted details', async function () {
      const { code, verifier } = await authorize(new FetchUserAgent(), {
        scope: 'openid',
        authorization_details: JSON.stringify(details),
      });
      const { status, body } = await redeem(code, verifier);
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.authorization_details).to.deep.equal(details);
      expect(body.id_token, 'openid asked for an ID token').to.be.a('string');
      // The access token is the details' (its audience is this server's RAR resource), not UserInfo's.
      const userinfoStatus = (
        await server.request('/userinfo', { headers: { Authorization: `Bearer ${body.access_token}` } })
      ).status;
      expect(userinfoStatus).to.equal(401);
      const claims = JSON.parse(Buffer.from(body.id_token.split('.')[1], 'base64url').toString());
      expect(claims).to.include({ sub: 'erin', aud: 'exact-spa' });
      const { token: caller } = await clientWithToken(server, 'exact-rs-combined', ['introspection']);
      const introspected = await postForm(
        server,
        '/introspect',
        { token: body.access_token },
        { Authorization: `Bearer ${caller}` },
      );
      expect(introspected.body).to.include({ active: true, sub: 'erin' });
      expect(introspected.body.authorization_details).to.deep.equal(details);
    });

    it('refuses a scope policy data does not mark combinable, and any resource, with invalid_request before sign-in', async function () {
      for (const scope of ['profile', 'openid read', 'openid email']) {
        const refused = await refusal(scope);
        expect(refused?.error, scope).to.equal('invalid_request');
        expect(refused?.description, scope).to.match(/cannot be combined with scope/);
      }
      const withResource = await refusal('openid', { resource: API });
      expect(withResource?.error).to.equal('invalid_request');
      expect(await refusal('openid'), 'openid alone goes on to sign-in').to.equal(null);
    });

    it('follows oauth.rar_combinable_scopes: more scopes when it names them, not even openid when it is empty', async function () {
      try {
        await updateOauthData(server, (data) => {
          data.rar_combinable_scopes = ['openid', 'email'];
        });
        expect(await refusal('openid email')).to.equal(null);
        expect((await refusal('openid profile'))?.error).to.equal('invalid_request');
        await updateOauthData(server, (data) => {
          data.rar_combinable_scopes = [];
        });
        expect((await refusal('openid'))?.error).to.equal('invalid_request');
      } finally {
        await updateOauthData(server, (data) => {
          data.rar_combinable_scopes = ['openid'];
        });
      }
    });
  });

  it('the code exchange asks the policy for what the code carries, whatever scope the request names', async function () {
    const { code, verifier } = await authorize(new FetchUserAgent(), { scope: 'openid email' });
    const { status, body } = await redeem(code, verifier, { scope: 'openid email profile read' });
    expect(status, JSON.stringify(body)).to.equal(200);
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
    expect(entry.policyInput.request.scopes.sort()).to.deep.equal(['email', 'openid']);
    expect(body.scope.split(' ').sort()).to.deep.equal(['email', 'openid']);
  });

  it("another client presenting a code is told only that it is unknown: no decision, the code's grant unchanged", async function () {
    await publicClient('exact-other-spa', ['openid']);
    const { code, verifier } = await authorize(new FetchUserAgent(), { scope: 'openid email read' });
    const unknown = await postForm(server, '/token', {
      grant_type: 'authorization_code',
      code: 'an-unknown-code-of-nobody-0123456789abcdefghij',
      redirect_uri: REDIRECT_URI,
      client_id: 'exact-other-spa',
      code_verifier: verifier,
      resource: API,
    });
    for (const resource of [{}, { resource: API }, { resource: 'https://elsewhere.example.test/' }] as Record<
      string,
      string
    >[]) {
      const foreign = await redeem(code, verifier, { client_id: 'exact-other-spa', ...resource });
      expect(foreign.status).to.equal(400);
      expect(foreign.body, JSON.stringify(resource)).to.deep.equal(unknown.body);
    }
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&clientId=exact-other-spa&size=1')).body
      .content;
    expect(entry.policyDecision, 'no decision was asked for another client').to.equal(null);

    const { status, body } = await redeem(code, verifier);
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.scope.split(' ').sort(), "the owner gets all of its code's scopes").to.deep.equal([
      'email',
      'openid',
      'read',
    ]);
  });

  it('introspection shows the scopes issued, narrowed but never widened by the introspect decision', async function () {
    const { token: caller } = await clientWithToken(server, 'widening-rs', ['introspection']);
    const { code, verifier } = await authorize(new FetchUserAgent(), { scope: 'openid email' });
    const issued = (await redeem(code, verifier)).body;
    const rules = (await server.admin('GET', '/policy-rules')).body as any[];
    const introspectRule = rules.find((rule) => /^package arbiter\.introspect\b/m.test(rule.content));
    const widening =
      'package arbiter.introspect\n\ndecision := {"allow": true, "scopes": ["openid", "admin", "write"]}\n';
    expect(
      (await server.admin('PUT', `/policy-rules/${introspectRule.id}`, { ...pick(introspectRule), content: widening }))
        .status,
    ).to.equal(200);
    await policyInForce(server);
    const { body } = await postForm(
      server,
      '/introspect',
      { token: issued.access_token },
      { Authorization: `Bearer ${caller}` },
    );
    expect(body.active).to.equal(true);
    expect(body.scope, 'openid stays, email is narrowed away, admin and write are never added').to.equal('openid');
    expect((await server.admin('PUT', `/policy-rules/${introspectRule.id}`, pick(introspectRule))).status).to.equal(
      200,
    );
    await policyInForce(server);
  });

  describe('missing and unknown parameters', function () {
    const token = (form: Record<string, string>) => postForm(server, '/token', { client_id: 'exact-spa', ...form });

    it('answers invalid_request for a code exchange without code or redirect_uri, and a refresh without refresh_token', async function () {
      for (const [form, missing] of [
        [{ grant_type: 'authorization_code', redirect_uri: REDIRECT_URI, code_verifier: 'x'.repeat(43) }, 'code'],
        [{ grant_type: 'authorization_code', code: 'some-code', code_verifier: 'x'.repeat(43) }, 'redirect_uri'],
        [{ grant_type: 'refresh_token' }, 'refresh_token'],
      ] as const) {
        const { status, body } = await token(form);
        expect(status, missing).to.equal(400);
        expect(body.error, missing).to.equal('invalid_request');
        expect(body.error_description, missing).to.contain(missing);
      }
    });

    it('answers invalid_grant saying so for an unknown code or refresh token', async function () {
      const unknownCode = await token({
        grant_type: 'authorization_code',
        code: 'no-such-code',
        redirect_uri: REDIRECT_URI,
        code_verifier: 'x'.repeat(43),
      });
      expect(unknownCode.body).to.include({ error: 'invalid_grant' });
      expect(unknownCode.body.error_description).to.match(/authorization code is unknown or expired/);
      const unknownRefresh = await token({ grant_type: 'refresh_token', refresh_token: 'no-such-token' });
      expect(unknownRefresh.body).to.include({ error: 'invalid_grant' });
      expect(unknownRefresh.body.error_description).to.match(/refresh token is unknown or expired/);
    });

    it('refuses /authorize without redirect_uri, even for a client with one registered URI, without redirecting', async function () {
      const query = new URLSearchParams({
        response_type: 'code',
        client_id: 'exact-spa',
        scope: 'openid',
        state: 's',
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
      });
      const response = await server.request(`/authorize?${query}`);
      expect(response.status).to.equal(400);
      expect(response.headers.get('location')).to.equal(null);
      const body = (await response.json()) as any;
      expect(body.error).to.equal('invalid_request');
      expect(body.error_description).to.contain('redirect_uri');
    });
  });
});

/** The writable fields of a policy rule record. */
function pick(rule: any): Record<string, unknown> {
  return { version: rule.version, kind: rule.kind, path: rule.path, content: rule.content, enabled: rule.enabled };
}
