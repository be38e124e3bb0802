import { expect } from 'chai';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';
import {
  signedIn as signedInAtDevIdp,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { LogoutReceiver } from '../support/logout-receiver.js';
import { eventually } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

const TOPIC = 'backchannel-logout';

interface OutboxAnswer {
  pending: number;
  givenUp: number;
  failingEntries: { topic: string; stream: string; attempts: number; lastError: string | null }[];
}

/** A relying party with a back-channel logout URI of its own receiver (down until the test says). */
async function registeredRp(
  server: TestServer,
  clientId: string,
): Promise<{ rp: TestClient; receiver: LogoutReceiver }> {
  const receiver = new LogoutReceiver();
  const rp = { clientId, redirectUri: `http://127.0.0.1:1/${clientId}/cb` };
  const created = await server.admin('POST', '/clients', {
    clientId,
    clientType: 'public',
    tokenEndpointAuthMethod: 'none',
    redirectUris: [rp.redirectUri],
    scopes: ['openid', 'profile'],
    backchannelLogoutUri: await receiver.start(),
    backchannelLogoutSessionRequired: true,
  });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  return { rp, receiver };
}

async function signedIn(server: TestServer, rp: TestClient, login: string) {
  const { agent, tokens } = await signedInAtDevIdp(server, rp, login);
  return { agent, idToken: tokens.id_token as string };
}

async function revokeSubject(server: TestServer, login: string) {
  const subjects = (await server.admin('GET', '/subjects')).body as { id: number; subjectId: string }[];
  const subject = subjects.find((each) => each.subjectId === login)!;
  const revoked = await server.admin('POST', `/subjects/${subject.id}/revoke-tokens`);
  expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
  return revoked.body.logoutTokens as { delivered: number; failed: number; kept: number };
}

const outbox = async (server: TestServer) => (await server.admin('GET', '/outbox')).body as OutboxAnswer;

/**
 * OIDC Back-Channel Logout 1.0 deliveries that fail are not lost: kept in the durable outbox (one
 * stream per client), a fresh logout token is signed and posted again with the outbox's back-off
 * until the relying party takes it, in order per client, once; or given up past
 * BACKCHANNEL_LOGOUT_RETRY_MAX_SECONDS. Own servers: the outbox's figures are counted per server,
 * and its back-off is shortened.
 */
describe('Back-Channel Logout retries through the outbox', function () {
  this.timeout(120_000);
  let server: TestServer;
  let idp: RegisteredDevIdp;
  const receivers: LogoutReceiver[] = [];

  before(async function () {
    server = await readyServer({ OUTBOX_POLL_MS: '200', OUTBOX_RETRY_MAX_SECONDS: '1' });
    idp = await startRegisteredDevIdp(server);
  });
  after(async function () {
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await idp?.close();
    await server?.close();
  });

  it('posts a fresh logout token, once, to a client that was down at /session/end once it is up', async function () {
    const { rp, receiver } = await registeredRp(server, 'bclr-end');
    receivers.push(receiver);
    const { agent, idToken } = await signedIn(server, rp, 'bclr-ann');
    receiver.refuseNext = Infinity;

    const confirmation = await agent.navigate(
      `${server.config.issuer}/session/end?id_token_hint=${idToken}&client_id=${rp.clientId}`,
    );
    expect(confirmation.status, confirmation.body).to.equal(200);
    const done = await agent.submitForm(confirmation, { logout: 'yes' });
    expect(done.status, 'the logout is answered while the client is down').to.equal(200);
    await eventually(async () =>
      (await outbox(server)).failingEntries.some(
        (entry) => entry.topic === TOPIC && entry.stream.endsWith(`:${rp.clientId}`) && entry.attempts > 0,
      ),
    );
    expect(receiver.tokens, 'nothing taken while down').to.have.length(0);

    receiver.refuseNext = 0;
    const token = (await receiver.tokensReceived(1))[0]!;
    const metadata = (await (await server.request('/.well-known/openid-configuration')).json()) as { jwks_uri: string };
    const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(metadata.jwks_uri)), {
      issuer: server.config.issuer,
      audience: rp.clientId,
      typ: 'logout+jwt',
    });
    const session = decodeJwt(idToken);
    expect(payload).to.include({ sub: session.sub, sid: session.sid });
    expect(payload.iat, 'signed at delivery, not at the logout').to.be.at.least(Math.floor(Date.now() / 1000) - 30);
    await eventually(async () => (await outbox(server)).pending === 0);
    expect(receiver.tokens, 'delivered once').to.have.length(1);
  });

  it('delivers in order per client, and a client that stays down holds no other client up', async function () {
    const live = await registeredRp(server, 'bclr-live');
    const dead = await registeredRp(server, 'bclr-dead');
    receivers.push(live.receiver, dead.receiver);
    await signedIn(server, dead.rp, 'bclr-dan');
    await signedIn(server, live.rp, 'bclr-bob');
    await signedIn(server, live.rp, 'bclr-cy');
    live.receiver.refuseNext = Infinity;
    dead.receiver.refuseNext = Infinity;

    // The dead client's logout is the oldest entry; each answer comes after one attempt.
    for (const login of ['bclr-dan', 'bclr-bob', 'bclr-cy'])
      expect(await revokeSubject(server, login)).to.deep.equal({ delivered: 0, failed: 1, kept: 1 });

    live.receiver.refuseNext = 0;
    const tokens = await live.receiver.tokensReceived(2);
    expect(tokens.map((token) => decodeJwt(token).sub)).to.deep.equal(['bclr-bob', 'bclr-cy']);
    const state = await outbox(server);
    expect(state.failingEntries.map((entry) => entry.stream)).to.include(`${TOPIC}:_default:bclr-dead`);
    expect(state.failingEntries.find((entry) => entry.stream.endsWith(':bclr-dead'))?.lastError).to.contain('503');

    dead.receiver.refuseNext = 0;
    expect(decodeJwt((await dead.receiver.tokensReceived(1))[0]!).sub).to.equal('bclr-dan');
    await eventually(async () => (await outbox(server)).pending === 0);
    expect(live.receiver.tokens, 'each delivered once').to.have.length(2);
    expect(dead.receiver.tokens).to.have.length(1);
  });
});

describe('Back-Channel Logout retries given up', function () {
  this.timeout(120_000);
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let receiver: LogoutReceiver | undefined;

  before(async function () {
    server = await readyServer({
      OUTBOX_POLL_MS: '200',
      OUTBOX_RETRY_MAX_SECONDS: '1',
      BACKCHANNEL_LOGOUT_RETRY_MAX_SECONDS: '1',
    });
    idp = await startRegisteredDevIdp(server);
  });
  after(async function () {
    await receiver?.close();
    await idp?.close();
    await server?.close();
  });

  it('drops a logout token older than BACKCHANNEL_LOGOUT_RETRY_MAX_SECONDS and counts it in GET /outbox', async function () {
    const registered = await registeredRp(server, 'bclr-gone');
    receiver = registered.receiver;
    await signedIn(server, registered.rp, 'bclr-eve');
    receiver.refuseNext = Infinity;
    expect(await revokeSubject(server, 'bclr-eve')).to.deep.equal({ delivered: 0, failed: 1, kept: 1 });
    await eventually(async () => {
      const state = await outbox(server);
      return state.givenUp === 1 && state.pending === 0;
    }, 30_000);
    receiver.refuseNext = 0;
    expect(receiver.tokens).to.have.length(0);
    expect(await (await server.request('/metrics')).text()).to.match(/^arbiter_outbox_given_up 1$/m);
  });
});
