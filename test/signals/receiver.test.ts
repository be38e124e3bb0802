import { expect } from 'chai';
import { SSF_RECEIVED_SETS_COLLECTION } from '../../src/signals/receiver/index.js';
import { randomUUID } from 'node:crypto';
import { withOneFailedFind } from '../support/store-fault.js';
import { FetchUserAgent } from '../support/browser.js';
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
  type UserTokens,
} from '../support/dev-idp.js';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';
import { CAEP_EVENT, pushSet, RISC_EVENT, SsfTransmitter } from '../support/ssf-transmitter.js';

const PUSH_SECRET = 'ssf-push-secret-0123456789';

/**
 * Issue 40, "a receiver for the upstream IdP": an identity provider record names its Shared
 * Signals transmitter; the SETs it pushes (RFC 8935) to /idp/ssf-events, once verified (signature
 * against the transmitter's keys, typ, iss, aud, iat, jti), revoke what the user they name holds
 * here: tokens inactive at introspection, refresh refused, the sign-in session ended. Whatever is
 * refused is answered RFC 8935's way and revokes nothing. The user signs in through the
 * development IdP; the transmitter is written here (test/support/ssf-transmitter.ts).
 */
describe('SSF receiver: signals pushed by the upstream identity provider', function () {
  const REDIRECT_URI = 'http://127.0.0.1:1/ssf-receiver/callback';
  const RS = `ssf-receiver-rs-${randomUUID().slice(0, 8)}`;
  let server: TestServer;
  let transmitter: SsfTransmitter;
  let idp: RegisteredDevIdp;
  let spa: TestClient;
  let rsSecret: string;
  let pushUrl: string;
  const unique = (name: string) => `ssf-${name}-${randomUUID().slice(0, 8)}`;

  before(async function () {
    // withServer's default tenant collects identity providers: every sign-in names its own (upstream_idp).
    server = await withServer();
    transmitter = await SsfTransmitter.start();
    // No ssfJwksUri: its keys are found through its /.well-known/ssf-configuration.
    idp = await startRegisteredDevIdp(server, {
      idpId: unique('idp'),
      fields: { ssfIssuer: transmitter.issuer, ssfPushSecret: PUSH_SECRET },
      // Its ID tokens then carry the upstream session's sid, which a session-revoked may name alone.
      backchannelLogout: true,
    });
    spa = await registerPublicClient(server, REDIRECT_URI, { clientId: unique('spa') });
    rsSecret = await confidentialClient(server, RS, {
      scopes: ['introspection'],
      grantedResources: [{ type: 'urn:as:introspect', scopes: [] }],
    });
    pushUrl = `${server.url}/idp/ssf-events`;
  });
  after(async function () {
    await server?.admin('DELETE', `/identity-providers/${idp?.idpId}`);
    await idp?.close();
    await transmitter?.close();
  });

  interface SignedIn {
    login: string;
    agent: FetchUserAgent;
    tokens: UserTokens;
  }

  async function signIn(login = unique('user')): Promise<SignedIn> {
    const request = await authorizationRequest(server, spa, { upstream_idp: idp.idpId });
    const agent = new FetchUserAgent();
    const page = await agent.navigate(request.url, arrivingAt(REDIRECT_URI));
    const landed = await passDevIdpForms(agent, page, login, arrivingAt(REDIRECT_URI));
    const code = landed.url.searchParams.get('code');
    expect(code, landed.url.href).to.be.a('string');
    const { status, body } = await redeemCode(server, spa, code!, request.codeVerifier);
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.refresh_token, 'a refresh token').to.be.a('string');
    return { login, agent, tokens: { access: body.access_token, refresh: body.refresh_token } };
  }

  const active = async (token: string): Promise<boolean> => {
    const answer = await postForm(server, '/introspect', { token }, { Authorization: basic(RS, rsSecret) });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.active as boolean;
  };

  /** Whether the browser's sign-in session here still stands: an authorization request with prompt=none gets a code. */
  async function sessionStands(user: SignedIn): Promise<boolean> {
    const request = await authorizationRequest(server, spa, { upstream_idp: idp.idpId, prompt: 'none' });
    const landed = await user.agent.navigate(request.url, arrivingAt(REDIRECT_URI));
    if (landed.url.searchParams.has('code')) return true;
    expect(landed.url.searchParams.get('error'), landed.url.href).to.equal('login_required');
    return false;
  }

  async function expectHolds(user: SignedIn, holds: boolean): Promise<void> {
    expect(await active(user.tokens.access), 'the access token is active').to.equal(holds);
    expect(await active(user.tokens.refresh), 'the refresh token is active').to.equal(holds);
  }

  const issSub = (login: string) => ({ format: 'iss_sub', iss: idp.issuer, sub: login });

  async function pushed(set: string, secret: string | null = PUSH_SECRET, headers: Record<string, string> = {}) {
    const response = await pushSet(pushUrl, set, secret, headers);
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, string>) : null, response };
  }

  it("revokes the user's access and refresh tokens and ends their session on a CAEP session-revoked, audited and counted", async function () {
    const user = await signIn();
    const bystander = await signIn();
    await expectHolds(user, true);
    expect(await sessionStands(user), 'the session stands before').to.equal(true);

    const set = await transmitter.set(server.config.issuer, `${CAEP_EVENT}session-revoked`, issSub(user.login));
    const answer = await pushed(set);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(202);

    await expectHolds(user, false);
    expect(await sessionStands(user), 'the session has ended').to.equal(false);
    await expectHolds(bystander, true);

    const audit = await server.admin('GET', `/audit-logs?endpoint=${encodeURIComponent('/idp/ssf-events')}`);
    const entry = (audit.body.content as Record<string, any>[]).find((each) => each.subjectId === user.login);
    expect(entry, JSON.stringify(audit.body.content)).not.to.equal(undefined);
    expect(entry!.outcome).to.equal('allow');
    expect(entry!.requestSummary.result).to.include({
      idp: idp.idpId,
      events: 'session-revoked',
      actions: 'revoked',
    });
    const metrics = await (await server.request('/metrics')).text();
    expect(metrics).to.match(/arbiter_ssf_received_events_total\{event="session-revoked",outcome="revoked"\} [1-9]/);
  });

  it('revokes what the user holds on a CAEP session-revoked naming only their upstream session (complex with session)', async function () {
    const user = await signIn();
    const bystander = await signIn();
    const sid = await idp.upstreamSid(user.agent);
    expect(sid, 'the upstream session has a sid').to.be.a('string');
    await expectHolds(user, true);

    const session = { format: 'complex', session: { format: 'opaque', id: sid } };
    const set = await transmitter.set(server.config.issuer, `${CAEP_EVENT}session-revoked`, session);
    const answer = await pushed(set);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(202);

    // Before: a complex subject without `user` named nobody, and nothing was revoked.
    await expectHolds(user, false);
    expect(await sessionStands(user), 'the session has ended').to.equal(false);
    await expectHolds(bystander, true);
    // That upstream session is over: named again, it names nobody.
    const again = await transmitter.set(server.config.issuer, `${CAEP_EVENT}session-revoked`, session);
    expect((await pushed(again)).status).to.equal(202);
    await expectHolds(bystander, true);
  });

  it('revokes on a RISC account-disabled naming the user by email in a complex subject, and acknowledges account-enabled', async function () {
    const user = await signIn();
    const subject = { format: 'complex', user: { format: 'email', email: `${user.login}@example.test` } };

    const enabled = await pushed(await transmitter.set(server.config.issuer, `${RISC_EVENT}account-enabled`, subject));
    expect(enabled.status, JSON.stringify(enabled.body)).to.equal(202);
    await expectHolds(user, true);

    const disabled = await pushed(
      await transmitter.set(server.config.issuer, `${RISC_EVENT}account-disabled`, subject),
    );
    expect(disabled.status, JSON.stringify(disabled.body)).to.equal(202);
    await expectHolds(user, false);
    // The upstream refuses a disabled account's sign-in; once it is enabled there, the user signs in here again.
    await expectHolds(await signIn(user.login), true);
  });

  // RISC 1.0 §2.2, §2.6: the account deleted, or its identifier given to someone else (found 2026-11-29: ignored).
  for (const event of ['account-purged', 'identifier-recycled'])
    it(`revokes what the user holds on a RISC ${event}`, async function () {
      const user = await signIn();
      const answer = await pushed(
        await transmitter.set(server.config.issuer, `${RISC_EVENT}${event}`, issSub(user.login)),
      );
      expect(answer.status, JSON.stringify(answer.body)).to.equal(202);
      await expectHolds(user, false);
      const audit = await server.admin('GET', `/audit-logs?endpoint=${encodeURIComponent('/idp/ssf-events')}`);
      const entry = (audit.body.content as Record<string, any>[]).find((each) => each.subjectId === user.login);
      expect(entry?.requestSummary.result).to.include({ events: event, actions: 'revoked' });
    });

  // Found 2026-11-29: the jti was kept before the SET was acted on, so the transmitter's retry after a
  // store failure was refused as a repeat (400, which RFC 8935 makes final) and the revocation was lost.
  it('acts on a SET that failed for a store fault when the transmitter pushes it again', async function () {
    const user = await signIn();
    const set = await transmitter.set(server.config.issuer, `${RISC_EVENT}credential-compromise`, issSub(user.login));
    const failed = await withOneFailedFind(server.store, 'subjects', () => pushed(set));
    expect(failed.status, JSON.stringify(failed.body)).to.equal(503);
    await expectHolds(user, true);
    const retried = await pushed(set);
    expect(retried.status, JSON.stringify(retried.body)).to.equal(202);
    await expectHolds(user, false);
    expect((await pushed(set)).status, 'acted on once').to.equal(400);
  });

  it('revokes on a RISC credential-compromise naming the user by an opaque subject', async function () {
    const user = await signIn();
    const set = await transmitter.set(server.config.issuer, `${RISC_EVENT}credential-compromise`, {
      format: 'opaque',
      id: user.login,
    });
    const answer = await pushed(set);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(202);
    await expectHolds(user, false);
  });

  describe('refusals: RFC 8935 errors, nothing revoked', function () {
    let user: SignedIn;
    before(async function () {
      user = await signIn();
    });
    afterEach(async function () {
      await expectHolds(user, true);
    });

    const revocation = (options: Parameters<SsfTransmitter['set']>[3] = {}, audience = server.config.issuer) =>
      transmitter.set(audience, `${CAEP_EVENT}session-revoked`, issSub(user.login), options);

    async function expectRefused(
      answer: Awaited<ReturnType<typeof pushed>>,
      status: number,
      err: string,
      described?: string,
    ): Promise<void> {
      expect(answer.status, JSON.stringify(answer.body)).to.equal(status);
      expect(answer.response.headers.get('content-type')).to.match(/^application\/json/);
      expect(answer.body).to.have.property('err', err);
      expect(answer.body!.description).to.be.a('string');
      if (described) expect(answer.body!.description).to.contain(described);
    }

    it('a wrong signature: invalid_key', async function () {
      const forged = await revocation({ key: await SsfTransmitter.otherKey() });
      await expectRefused(await pushed(forged), 400, 'invalid_key');
    });

    it('another issuer: invalid_issuer', async function () {
      const set = await revocation({ claims: { iss: 'https://elsewhere.example' } });
      await expectRefused(await pushed(set), 400, 'invalid_issuer');
    });

    it('another audience: invalid_audience', async function () {
      await expectRefused(await pushed(await revocation({}, 'https://rp.elsewhere.example')), 400, 'invalid_audience');
    });

    it('a replayed jti: invalid_request, and the user signed in again keeps what they hold', async function () {
      const other = await signIn();
      const set = await transmitter.set(server.config.issuer, `${CAEP_EVENT}session-revoked`, issSub(other.login));
      expect((await pushed(set)).status).to.equal(202);
      await expectHolds(other, false);
      const again = await signIn(other.login);
      await expectRefused(await pushed(set), 400, 'invalid_request', 'already received');
      await expectHolds(again, true);
    });

    it('remembers a jti as long as its SET could be accepted, an iat ahead of the clock included', async function () {
      const iat = Math.floor(Date.now() / 1000) + 50;
      const jti = `ahead-${Date.now()}`;
      // Another user's: a SET accepted revokes what its user holds.
      const other = await signIn();
      const set = await transmitter.set(server.config.issuer, `${CAEP_EVENT}session-revoked`, issSub(other.login), {
        claims: { iat, jti },
      });
      expect((await pushed(set)).status).to.equal(202);
      const kept = await server.store.collection(SSF_RECEIVED_SETS_COLLECTION, '_default').find({});
      const latest = Math.max(...kept.map((doc) => Number(doc.expiresAt)));
      // Accepted until iat + the maximum age + the clock tolerance (60 s) on either side.
      expect(latest).to.be.at.least((iat + server.config.ssfReceiverMaxAgeSeconds + 120) * 1000);
    });

    it('a body over 64 KiB: 413 invalid_request', async function () {
      const padded = await revocation({ claims: { padding: 'x'.repeat(70 * 1024) } });
      await expectRefused(await pushed(padded), 413, 'invalid_request');
    });

    it('no credential, or a wrong one: 401 authentication_failed with a Bearer challenge', async function () {
      for (const secret of [null, 'not-the-push-secret-at-all']) {
        const answer = await pushed(await revocation(), secret);
        await expectRefused(answer, 401, 'authentication_failed');
        expect(answer.response.headers.get('www-authenticate')).to.equal('Bearer');
      }
    });

    it('a SET that is not one: wrong media type, typ, stale iat, no jti, a U+0000, not a JWT: invalid_request', async function () {
      const now = Math.floor(Date.now() / 1000);
      const manyEvents = Object.fromEntries(
        Array.from({ length: 9 }, (_, index) => [`${CAEP_EVENT}session-revoked-${index}`, {}]),
      );
      const cases: [Promise<Awaited<ReturnType<typeof pushed>>>, string][] = [
        [pushed(await revocation(), PUSH_SECRET, { 'Content-Type': 'application/jwt' }), 'application/secevent+jwt'],
        [pushed(await revocation({ header: { typ: 'JWT' } })), 'typ'],
        [pushed(await revocation({ claims: { iat: now - 2 * 3600 } })), 'claims'],
        [pushed(await revocation({ claims: { iat: now + 3600 } })), 'claims'],
        [pushed(await revocation({ claims: { jti: undefined } })), 'jti'],
        [pushed(await revocation({ claims: { txn: 'a\u0000b' } })), 'U+0000'],
        [pushed(await revocation({ claims: { events: manyEvents } })), 'more than 8 events'],
        // Found 2026-11-29: 22,000 nested arrays overflowed the stack, and the engine's message was the answer.
        [
          pushed(await revocation({ claims: { deep: JSON.parse(`${'['.repeat(100)}${']'.repeat(100)}`) } })),
          'nest deeper',
        ],
        [pushed('not.a-jwt'), 'JWT'],
      ];
      for (const [answer, described] of cases) await expectRefused(await answer, 400, 'invalid_request', described);
    });

    it('a disabled identity provider: 403 access_denied', async function () {
      const record = (await server.admin('GET', `/identity-providers/${idp.idpId}`)).body as Record<string, unknown>;
      const { id: _id, createdAt: _created, updatedAt: _updated, ...fields } = record;
      try {
        expect(
          (await server.admin('PUT', `/identity-providers/${idp.idpId}`, { ...fields, enabled: false })).status,
        ).to.equal(200);
        await expectRefused(await pushed(await revocation()), 403, 'access_denied');
      } finally {
        expect(
          (await server.admin('PUT', `/identity-providers/${idp.idpId}`, { ...fields, enabled: true })).status,
        ).to.equal(200);
      }
      // Disabling the provider revoked what its users held: this test's user signs in again.
      user = await signIn(user.login);
    });
  });
});

/**
 * The receiver of a tenant by path (`/t/<tenant>/idp/ssf-events`): the audience it expects by
 * default is the tenant's own issuer, a push secret of another tenant's provider authenticates
 * nothing there, and a transmitter whose keys cannot be fetched gets a 503 it may retry.
 */
describe('SSF receiver: a tenant by path', function () {
  const PUSH_SECRET_HERE = 'ssf-tenant-push-secret-0123456789';
  let server: TestServer;
  let transmitter: SsfTransmitter;
  let tenant: string;
  let pushUrl: string;
  let tenantIssuer: string;

  before(async function () {
    server = await withServer();
    transmitter = await SsfTransmitter.start();
    tenant = `ssf-${randomUUID().slice(0, 8)}`;
    tenantIssuer = `${server.config.issuer}/t/${tenant}`;
    pushUrl = `${server.url}/t/${tenant}/idp/ssf-events`;
    // Its keys named outright: no discovery.
    await registerIdentityProvider(server, 'https://idp.ssf-tenant.example', {
      tenantId: tenant,
      idpId: 'ssf-tenant-idp',
      fields: {
        ssfIssuer: transmitter.issuer,
        ssfJwksUri: `${transmitter.issuer}/jwks`,
        ssfPushSecret: PUSH_SECRET_HERE,
      },
    });
  });
  after(async function () {
    await transmitter?.close();
  });

  const nobody = { format: 'iss_sub', iss: 'https://idp.ssf-tenant.example', sub: 'nobody-signed-in' };

  it("expects the tenant's own issuer as the audience", async function () {
    const accepted = await pushSet(
      pushUrl,
      await transmitter.set(tenantIssuer, `${CAEP_EVENT}session-revoked`, nobody),
      PUSH_SECRET_HERE,
    );
    expect(accepted.status, await accepted.text()).to.equal(202);
    const elsewhere = await pushSet(
      pushUrl,
      await transmitter.set(server.config.issuer, `${CAEP_EVENT}session-revoked`, nobody),
      PUSH_SECRET_HERE,
    );
    expect(elsewhere.status).to.equal(400);
    expect(await elsewhere.json()).to.have.property('err', 'invalid_audience');

    const audit = await server.admin(
      'GET',
      `/audit-logs?tenantId=${tenant}&endpoint=${encodeURIComponent('/idp/ssf-events')}`,
    );
    const results = (audit.body.content as { requestSummary: { result?: Record<string, string> } }[]).map(
      (entry) => entry.requestSummary.result,
    );
    expect(results).to.deep.include({
      idp: 'ssf-tenant-idp',
      jti: results.find((result) => result?.jti)?.jti,
      events: 'session-revoked',
      actions: 'ignored',
      revoked: '0',
    });
  });

  it("acknowledges the stream's verification event (SSF 1.0 §8.1.4), counted in /metrics", async function () {
    const verification = await transmitter.set(
      tenantIssuer,
      'https://schemas.openid.net/secevent/ssf/event-type/verification',
      { format: 'opaque', id: 'stream-1' },
      { claims: { events: { 'https://schemas.openid.net/secevent/ssf/event-type/verification': { state: 'x' } } } },
    );
    const answer = await pushSet(pushUrl, verification, PUSH_SECRET_HERE);
    expect(answer.status, await answer.text()).to.equal(202);
    const metrics = await (await server.request('/metrics')).text();
    expect(metrics).to.match(/arbiter_ssf_received_events_total\{event="verification",outcome="acknowledged"\} [1-9]/);
  });

  it("does not take another tenant's push secret", async function () {
    const set = await transmitter.set(tenantIssuer, `${CAEP_EVENT}session-revoked`, nobody);
    const answer = await pushSet(pushUrl, set, PUSH_SECRET);
    expect(answer.status).to.equal(401);
    expect(await answer.json()).to.have.property('err', 'authentication_failed');
  });

  it("answers 503 while the transmitter's keys cannot be fetched", async function () {
    const closed = await SsfTransmitter.start();
    await closed.close();
    const secret = 'ssf-unreachable-push-secret-0123';
    await registerIdentityProvider(server, 'https://idp.ssf-unreachable.example', {
      tenantId: tenant,
      idpId: 'ssf-unreachable-idp',
      fields: { ssfIssuer: closed.issuer, ssfJwksUri: `${closed.issuer}/jwks`, ssfPushSecret: secret },
    });
    const answer = await pushSet(
      pushUrl,
      await transmitter.set(tenantIssuer, `${CAEP_EVENT}session-revoked`, nobody, { claims: { iss: closed.issuer } }),
      secret,
    );
    const body = (await answer.json()) as Record<string, string>;
    expect(answer.status, JSON.stringify(body)).to.equal(503);
    expect(body.error).to.equal('temporarily_unavailable');
    expect(answer.headers.get('retry-after')).to.be.a('string');
  });
});
