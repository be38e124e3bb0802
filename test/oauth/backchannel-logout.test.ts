import { expect } from 'chai';
import { withOneFailedFind } from '../support/store-fault.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, UnsecuredJWT } from 'jose';
import { DEV_IDP_CLIENT, startDevIdp } from '../../src/dev-idp/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  startRegisteredDevIdp,
  withSignInServer,
  type RegisteredDevIdp,
  signedIn as signedInAtDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { LogoutReceiver } from '../support/logout-receiver.js';
import { eventually, FORM } from '../support/oauth.js';
import { freePort, readyServer, type TestServer } from '../support/server.js';

const BACK_CHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/**
 * OIDC Back-Channel Logout 1.0: a client registered with a `backchannel_logout_uri` is posted a
 * logout token, signed with the tenant's keys, when the user's session ends at /session/end and
 * when an operator revokes the subject's tokens; a refused post is tried again.
 */
describe('Back-Channel Logout 1.0', function () {
  let server: TestServer;
  let receiver: LogoutReceiver;
  let rp: TestClient;
  let logoutUri: string;
  const unique = (name: string) => `${name}-${Math.random().toString(36).slice(2, 8)}`;

  before(async function () {
    ({ server } = await withSignInServer());
    receiver = new LogoutReceiver();
    logoutUri = await receiver.start();
    rp = { clientId: unique('bcl-rp'), redirectUri: 'http://127.0.0.1:1/bcl/cb' };
    const created = await server.admin('POST', '/clients', {
      clientId: rp.clientId,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [rp.redirectUri],
      scopes: ['openid', 'profile'],
      backchannelLogoutUri: logoutUri,
      backchannelLogoutSessionRequired: true,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
  });
  after(async function () {
    await receiver?.close();
  });

  async function signedIn(login: string): Promise<{ agent: FetchUserAgent; idToken: string }> {
    const { agent, tokens } = await signedInAtDevIdp(server, rp, login);
    return { agent, idToken: tokens.id_token };
  }

  /** The logout token verified as the spec's §2.4 requires, with the issuer's published keys. */
  async function verifiedLogoutToken(token: string, idToken: string): Promise<Record<string, unknown>> {
    const metadata = (await (await server.request('/.well-known/openid-configuration')).json()) as { jwks_uri: string };
    const jwks = createRemoteJWKSet(new URL(metadata.jwks_uri));
    const { payload } = await jwtVerify(token, jwks, { issuer: server.config.issuer, audience: rp.clientId });
    const session = decodeJwt(idToken);
    expect(decodeProtectedHeader(token).typ).to.equal('logout+jwt');
    expect(payload.sub).to.equal(session.sub);
    expect(payload.sid, 'the session id the ID token carried').to.equal(session.sid).and.to.be.a('string');
    expect(payload.events).to.deep.equal({ [BACK_CHANNEL_LOGOUT_EVENT]: {} });
    expect(payload).not.to.have.property('nonce');
    expect(payload.jti).to.be.a('string');
    return payload;
  }

  it('advertises back-channel logout with sessions in discovery', async function () {
    const metadata = (await (await server.request('/.well-known/openid-configuration')).json()) as Record<
      string,
      unknown
    >;
    expect(metadata).to.include({ backchannel_logout_supported: true, backchannel_logout_session_supported: true });
  });

  it('posts a signed logout token to the client when the user logs out at /session/end', async function () {
    const before = receiver.tokens.length;
    const { agent, idToken } = await signedIn(unique('bcl-ann'));
    const confirmation = await agent.navigate(
      `${server.config.issuer}/session/end?id_token_hint=${idToken}&client_id=${rp.clientId}`,
    );
    expect(confirmation.status, confirmation.body).to.equal(200);
    const done = await agent.submitForm(confirmation, { logout: 'yes' });
    expect(done.status).to.equal(200);
    const token = (await receiver.tokensReceived(before + 1)).slice(before)[0]!;
    await verifiedLogoutToken(token, idToken);
  });

  it("posts a logout token when an operator revokes the subject's tokens, again after a refused post, and audits it", async function () {
    const login = unique('bcl-bob');
    const { idToken } = await signedIn(login);
    const subjects = (await server.admin('GET', '/subjects')).body as { id: number; subjectId: string }[];
    const subject = subjects.find((each) => each.subjectId === login)!;
    const before = receiver.tokens.length;
    receiver.refuseNext = 1;

    const revoked = await server.admin('POST', `/subjects/${subject.id}/revoke-tokens`);
    expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
    // The refused post is kept in the outbox and posted again after the answer.
    expect(revoked.body.logoutTokens).to.deep.equal({ delivered: 0, failed: 1, kept: 1 });
    const token = (await receiver.tokensReceived(before + 1)).slice(before)[0]!;
    await verifiedLogoutToken(token, idToken);

    const audit = await server.admin(
      'GET',
      `/audit-logs?endpoint=${encodeURIComponent(`/admin/api/subjects/${subject.id}/revoke-tokens`)}`,
    );
    const entry = JSON.stringify(audit.body.content[0]);
    for (const count of ['"logoutTokensDelivered":"0"', '"logoutTokensFailed":"1"', '"logoutTokensKept":"1"'])
      expect(entry).to.contain(count);
  });

  // Found 2026-11-30: oidc-provider's message quotes the whole URI, query included, and it was
  // logged and kept as the outbox entry's lastError, which GET /admin/api/outbox shows.
  it('shows a failing back-channel logout URI without its query (a credential) in the outbox', async function () {
    const failing = createServer((request, response) => {
      request.resume();
      response.writeHead(500).end();
    });
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
    try {
      const key = `bcl-key-${Math.random().toString(36).slice(2)}`;
      const keyed: TestClient = { clientId: unique('bcl-keyed'), redirectUri: 'http://127.0.0.1:1/bcl/keyed' };
      const created = await server.admin('POST', '/clients', {
        clientId: keyed.clientId,
        clientType: 'public',
        tokenEndpointAuthMethod: 'none',
        redirectUris: [keyed.redirectUri],
        scopes: ['openid'],
        backchannelLogoutUri: `http://127.0.0.1:${(failing.address() as AddressInfo).port}/bcl?key=${key}`,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const login = unique('bcl-keyed-user');
      await signedInAtDevIdp(server, keyed, login);
      const subjects = (await server.admin('GET', '/subjects')).body as { id: number; subjectId: string }[];
      const subject = subjects.find((each) => each.subjectId === login)!;
      expect((await server.admin('POST', `/subjects/${subject.id}/revoke-tokens`)).body.logoutTokens).to.include({
        kept: 1,
      });
      let entry: any;
      await eventually(async () => {
        const { body } = await server.admin('GET', '/outbox');
        entry = body.failingEntries.find((each: any) => String(each.stream).endsWith(`:${keyed.clientId}`));
        return typeof entry?.lastError === 'string';
      }, 20_000);
      expect(entry.lastError).to.match(/\/bcl\b/);
      expect(JSON.stringify(entry)).not.to.contain(key);
    } finally {
      failing.closeAllConnections();
      await new Promise((resolve) => failing.close(resolve));
    }
  });

  it('refuses a back-channel logout URI with a fragment, as dynamic registration would', async function () {
    const refused = await server.admin('POST', '/clients', {
      clientId: unique('bcl-bad'),
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [rp.redirectUri],
      backchannelLogoutUri: `${logoutUri}#fragment`,
    });
    expect(refused.status).to.equal(400);
    expect(JSON.stringify(refused.body)).to.contain('backchannelLogoutUri must not contain a fragment');
  });
});

/**
 * A server whose development IdP posts it logout tokens (`backchannelLogout`: naming the user, or
 * `'sid-only'`), and a public client of Arbiter's (`<name>-rp`) with a logout receiver of its own.
 */
async function upstreamLogoutSetup(
  backchannelLogout: true | 'sid-only',
  name: string,
): Promise<{ server: TestServer; idp: RegisteredDevIdp; receiver: LogoutReceiver; rp: TestClient }> {
  const server = await readyServer();
  const idp = await startRegisteredDevIdp(server, { backchannelLogout });
  const receiver = new LogoutReceiver();
  const rp = { clientId: `${name}-rp`, redirectUri: `http://127.0.0.1:1/${name}/cb` };
  const created = await server.admin('POST', '/clients', {
    clientId: rp.clientId,
    clientType: 'public',
    tokenEndpointAuthMethod: 'none',
    redirectUris: [rp.redirectUri],
    scopes: ['openid', 'profile', 'offline_access'],
    backchannelLogoutUri: await receiver.start(),
  });
  if (created.status !== 201) {
    await Promise.all([receiver.close(), idp.close(), server.close()]);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
  }
  return { server, idp, receiver, rp };
}

/**
 * Back-Channel Logout 1.0 with Arbiter as the relying party of its upstream identity provider:
 * a user's logout there (the provider posts Arbiter a logout token) ends their sessions here,
 * and Arbiter's own clients are told in turn; a token that is not the provider's is refused.
 */
describe('Back-Channel Logout from the upstream identity provider', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let receiver: LogoutReceiver;
  let rp: TestClient;

  before(async function () {
    ({ server, idp, receiver, rp } = await upstreamLogoutSetup(true, 'upstream-bcl'));
  });
  after(async function () {
    await receiver?.close();
    await idp?.close();
    await server?.close();
  });

  it("ends the user's sessions and tokens here when they log out at the upstream, and tells Arbiter's clients", async function () {
    const request = await authorizationRequest(server, rp);
    const agent = new FetchUserAgent();
    const page = await agent.navigate(request.url, arrivingAt(rp.redirectUri));
    const landed = await passDevIdpForms(agent, page, 'una', arrivingAt(rp.redirectUri));
    const tokens = await redeemCode(server, rp, landed.url.searchParams.get('code')!, request.codeVerifier);
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    const userinfo = () =>
      server.request('/userinfo', { headers: { Authorization: `Bearer ${tokens.body.access_token}` } });
    expect((await userinfo()).status, 'the access token works before').to.equal(200);

    // The user logs out at the upstream provider, in the same browser.
    const confirmation = await agent.navigate(`${idp.issuer}/session/end`);
    expect(confirmation.status, confirmation.body).to.equal(200);
    expect((await agent.submitForm(confirmation, { logout: 'yes' })).status).to.be.below(400);

    const token = (await receiver.tokensReceived(1))[0]!;
    expect(decodeJwt(token)).to.include({ sub: 'una', aud: rp.clientId });
    expect((await userinfo()).status, 'the access token is revoked').to.equal(401);
  });

  it('refuses a logout token that is not signed by the provider, a missing one, and one of an unknown issuer with 400 invalid_request', async function () {
    const unsigned = (claims: Record<string, unknown>) =>
      `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'logout+jwt' })).toString('base64url')}.${Buffer.from(
        JSON.stringify(claims),
      ).toString('base64url')}.`;
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      iss: idp.issuer,
      aud: 'arbiter',
      iat: now,
      jti: 'j1',
      sub: 'una',
      events: { [BACK_CHANNEL_LOGOUT_EVENT]: {} },
    };
    for (const [body, described] of [
      [{ logout_token: unsigned(claims) }, 'is not valid'],
      [{}, 'logout_token is required'],
      [
        { logout_token: unsigned({ ...claims, iss: 'https://elsewhere.example' }) },
        'not from an enabled identity provider',
      ],
    ] as const) {
      const answer = await server.request('/idp/backchannel-logout', {
        method: 'POST',
        headers: FORM,
        body: new URLSearchParams(body as Record<string, string>).toString(),
      });
      const error = (await answer.json()) as Record<string, string>;
      expect(answer.status, JSON.stringify(error)).to.equal(400);
      expect(error.error).to.equal('invalid_request');
      expect(error.error_description).to.contain(described);
    }
  });
});

describe('Back-Channel Logout from an upstream identity provider whose keys cannot be had', function () {
  let server: TestServer;
  let idp: Awaited<ReturnType<typeof startDevIdp>>;
  let issuer: string;

  const logLines: string[] = [];

  before(async function () {
    server = await readyServer(
      { LOG_LEVEL: 'warn' },
      { logStream: { write: (line: string) => void logLines.push(line) } },
    );
    const port = await freePort();
    idp = await startDevIdp({ port, redirectUris: [`${server.config.issuer}/idp/callback`] });
    issuer = `http://localhost:${port}`;
    const created = await server.admin('POST', '/identity-providers', {
      issuer,
      name: 'keys out of reach',
      clientId: DEV_IDP_CLIENT.clientId,
      clientSecret: DEV_IDP_CLIENT.clientSecret,
      // A closed port, and a credential in the query that nobody but the operator may read.
      jwksUri: `http://127.0.0.1:${await freePort()}/keys?access_token=operator-secret-0123`,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
  });
  after(async function () {
    await idp?.close();
    await server?.close();
  });

  it('answers 503 temporarily_unavailable, showing the key URL without its query', async function () {
    const token = new UnsecuredJWT({ iss: issuer, aud: DEV_IDP_CLIENT.clientId, events: {} }).encode();
    const answer = await server.request('/idp/backchannel-logout', {
      method: 'POST',
      headers: FORM,
      body: new URLSearchParams({ logout_token: token }).toString(),
    });
    const text = await answer.text();
    expect(answer.status, text).to.equal(503);
    expect(JSON.parse(text)).to.include({ error: 'temporarily_unavailable' });
    expect(text).to.contain('/keys could not be fetched').and.not.contain('operator-secret');
    // When to try again: when the keys are fetched again. Logged once, with why, not as an unexpected error.
    expect(answer.headers.get('retry-after')).to.equal('10');
    const logged = logLines.map((line) => JSON.parse(line) as { msg: string });
    expect(logged.filter((line) => line.msg === 'unhandled error')).to.deep.equal([]);
    const reason = logged.find((line) => line.msg.startsWith('identity provider unavailable: '));
    expect(reason?.msg)
      .to.match(/\/keys could not be fetched: .+/)
      .and.not.contain('operator-secret');
  });

  // Anyone may post a logout token: each must not make one more request to an upstream that fails.
  for (const failing of ['/.well-known/openid-configuration', '/keys'] as const) {
    it(`asks an upstream whose ${failing} fails once for many tokens at once, and not again for 10 seconds`, async function () {
      const upstream = await failingUpstream(failing);
      try {
        const created = await server.admin('POST', '/identity-providers', {
          issuer: upstream.issuer,
          name: `${failing} fails`,
          clientId: DEV_IDP_CLIENT.clientId,
          clientSecret: DEV_IDP_CLIENT.clientSecret,
        });
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
        const logOut = async () => {
          const token = new UnsecuredJWT({ iss: upstream.issuer, aud: DEV_IDP_CLIENT.clientId, events: {} }).encode();
          const body = new URLSearchParams({ logout_token: token }).toString();
          return (await server.request('/idp/backchannel-logout', { method: 'POST', headers: FORM, body })).status;
        };
        expect(await Promise.all(Array.from({ length: 10 }, logOut))).to.deep.equal(Array(10).fill(503));
        expect(await logOut()).to.equal(503);
        expect(upstream.failed).to.deep.equal([failing]);
      } finally {
        await upstream.close();
      }
    });
  }
});

/** An upstream on loopback whose discovery document names `/keys`, and whose `failing` path answers 500 (each recorded). */
async function failingUpstream(failing: string) {
  const failed: string[] = [];
  const upstream = createServer((request, response) => {
    if (request.url === failing) {
      failed.push(request.url);
      response.writeHead(500).end();
    } else if (request.url === '/.well-known/openid-configuration') {
      response.setHeader('content-type', 'application/json');
      response.end(
        JSON.stringify({
          issuer,
          authorization_endpoint: `${issuer}/auth`,
          jwks_uri: `${issuer}/keys`,
          response_types_supported: ['code'],
        }),
      );
    } else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  return { issuer, failed, close: () => new Promise((resolve) => upstream.close(resolve)) };
}

/**
 * Back-Channel Logout 1.0 §2.4: an upstream logout token may name the upstream session (`sid`)
 * and not the user. Arbiter remembers the upstream `sid` of each sign-in, so such a token ends the
 * sessions of the user that upstream session signed in, as a token with `sub` does.
 */
describe('Back-Channel Logout from the upstream identity provider, by sid alone', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let receiver: LogoutReceiver;
  let rp: TestClient;

  before(async function () {
    ({ server, idp, receiver, rp } = await upstreamLogoutSetup('sid-only', 'upstream-sid'));
  });
  after(async function () {
    await receiver?.close();
    await idp?.close();
    await server?.close();
  });

  /** A sign-in of `login` in a browser of its own: the browser, and a UserInfo call with its access token. */
  async function signedIn(login: string) {
    const request = await authorizationRequest(server, rp);
    const agent = new FetchUserAgent();
    const page = await agent.navigate(request.url, arrivingAt(rp.redirectUri));
    const landed = await passDevIdpForms(agent, page, login, arrivingAt(rp.redirectUri));
    const tokens = await redeemCode(server, rp, landed.url.searchParams.get('code')!, request.codeVerifier);
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    const userinfo = async () =>
      (await server.request('/userinfo', { headers: { Authorization: `Bearer ${tokens.body.access_token}` } })).status;
    expect(await userinfo(), 'the access token works before').to.equal(200);
    return { agent, userinfo };
  }

  it("ends the sessions of the user the upstream session signed in, and tells Arbiter's clients", async function () {
    const vera = await signedIn('vera');
    const walt = await signedIn('walt');

    // Vera logs out at the upstream, which names her session there and not her.
    const confirmation = await vera.agent.navigate(`${idp.issuer}/session/end`);
    expect(confirmation.status, confirmation.body).to.equal(200);
    expect((await vera.agent.submitForm(confirmation, { logout: 'yes' })).status).to.be.below(400);

    // The upstream answers its logout once Arbiter answered the token.
    expect(await vera.userinfo(), "vera's access token is revoked").to.equal(401);
    expect(await walt.userinfo(), "another user's is not").to.equal(200);
    const token = (await receiver.tokensReceived(1))[0]!;
    expect(decodeJwt(token)).to.include({ sub: 'vera', aud: rp.clientId });
  });

  /** What the upstream posts: `token`, a logout token of its own. */
  const postLogoutToken = (token: string) =>
    server.request('/idp/backchannel-logout', {
      method: 'POST',
      headers: FORM,
      body: new URLSearchParams({ logout_token: token }).toString(),
    });

  // Back-Channel Logout 1.0 §2.6: a jti is acted on once. Found 2026-11-29: a copy of a logout token
  // logged its user out again (every sign-in after it) for as long as the token was recent.
  it('acts on a logout token once: posted again, it is 400 invalid_request and ends nothing', async function () {
    await signedIn('yuri');
    const token = await idp.logoutToken({
      events: { [BACK_CHANNEL_LOGOUT_EVENT]: {} },
      jti: `once-${Date.now()}`,
      sub: 'yuri',
    });
    const post = () => postLogoutToken(token);
    expect((await post()).status).to.equal(200);
    const again = await signedIn('yuri');
    const replayed = await post();
    expect(replayed.status).to.equal(400);
    expect(await replayed.json()).to.include({ error: 'invalid_request' });
    expect(await again.userinfo(), 'the sign-in after it stands').to.equal(200);
  });

  it('acts on a logout token that failed for a store fault when the upstream posts it again', async function () {
    const zoe = await signedIn('zoe');
    const token = await idp.logoutToken({
      events: { [BACK_CHANNEL_LOGOUT_EVENT]: {} },
      jti: `fault-${Date.now()}`,
      sub: 'zoe',
    });
    const post = () => postLogoutToken(token);
    const failed = await withOneFailedFind(server.store, 'subjects', post);
    expect(failed.status).to.equal(503);
    expect(await zoe.userinfo(), 'nothing was done').to.equal(200);
    expect((await post()).status, 'the retry').to.equal(200);
    expect(await zoe.userinfo()).to.equal(401);
  });

  it('answers a session it never saw 200, ending nothing, and a token naming neither sub nor sid 400 invalid_request', async function () {
    const xena = await signedIn('xena');
    const post = async (claims: Record<string, unknown>) => postLogoutToken(await idp.logoutToken(claims));
    const event = { events: { [BACK_CHANNEL_LOGOUT_EVENT]: {} }, jti: `jti-${Date.now()}` };

    expect((await post({ ...event, sid: 'a-session-arbiter-never-saw' })).status).to.equal(200);
    expect(await xena.userinfo(), 'still signed in').to.equal(200);

    const neither = await post({ ...event, jti: `${event.jti}-2` });
    const error = (await neither.json()) as Record<string, string>;
    expect(neither.status, JSON.stringify(error)).to.equal(400);
    expect(error).to.include({
      error: 'invalid_request',
      error_description: 'a logout token must carry sub, sid or both',
    });
  });
});
