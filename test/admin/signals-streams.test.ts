import { expect } from 'chai';
import { clientWithToken, eventually } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';
import { PushReceiver, SetVerifier } from '../support/ssf-receiver.js';

const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const PUSH = 'urn:ietf:rfc:8935';
const POLL = 'urn:ietf:rfc:8936';
const tag = Date.now().toString(36);
const TENANT_A = `signals-view-a-${tag}`;
const TENANT_B = `signals-view-b-${tag}`;

type Json = any;

/**
 * GET /admin/api/signals/streams: a tenant's Shared Signals streams with what waits for each in
 * the outbox (a receiver that is down: pending, retrying, why; then delivered), for its own
 * tenant only; GET /outbox, which names every tenant's entries, is server-wide (a key confined to
 * tenants read it before).
 */
describe('Admin API: the Shared Signals streams of a tenant and their delivery', function () {
  let server: TestServer;
  const receivers: PushReceiver[] = [];

  before(async function () {
    server = await withServer({ OUTBOX_POLL_MS: '200', OUTBOX_RETRY_MAX_SECONDS: '1' });
  });
  after(async function () {
    await Promise.all(receivers.map((receiver) => receiver.close()));
  });

  /** A receiver client of `tenant` with a stream (push to a loopback listener, or poll); the listener starts down. */
  async function streamOf(tenant: string, method: typeof PUSH | typeof POLL, query = '') {
    const receiverId = `viewer-${method === PUSH ? 'push' : 'poll'}`;
    const { token } = await clientWithToken(server, receiverId, ['ssf.manage'], {}, tenant);
    const issuer = `${server.config.issuer}/t/${tenant}`;
    const listener = new PushReceiver();
    receivers.push(listener);
    listener.refuse = true;
    listener.verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, receiverId);
    const call = async (path: string, json: unknown) => {
      const response = await server.request(`/t/${tenant}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        json,
      });
      return { status: response.status, body: (await response.json().catch(() => null)) as Json };
    };
    const delivery =
      method === PUSH
        ? { method, endpoint_url: `${await listener.start()}${query}`, authorization_header: 'Bearer push-secret-123' }
        : { method };
    const created = await call('/ssf/streams', { delivery, events_requested: [SESSION_REVOKED] });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const streamId = created.body.stream_id as string;
    return { streamId, listener, receiverId, verify: () => call('/ssf/verify', { stream_id: streamId }) };
  }

  const view = async (tenant: string, key?: string) => {
    const response = await server.request('/admin/api/signals/streams', { admin: key === undefined, key, tenant });
    return { status: response.status, body: (await response.json()) as Json };
  };

  it("shows a push stream's SETs pending and retrying with why while its receiver is down, then delivered", async function () {
    const ssfCounts = async () => ((await server.admin('GET', '/outbox')).body as Json).topics.ssf as Json | undefined;
    const before = (await ssfCounts()) ?? { delivered: 0, failures: 0 };
    const { streamId, listener, receiverId, verify } = await streamOf(TENANT_A, PUSH, '?token=query-secret');
    expect((await verify()).status).to.equal(204);
    let stream: Json;
    await eventually(async () => {
      stream = (await view(TENANT_A)).body.streams.find((each: Json) => each.streamId === streamId);
      return stream?.delivery.retrying === 1;
    });
    expect(stream).to.deep.include({
      receiver: receiverId,
      deliveryMethod: PUSH,
      status: 'enabled',
      eventsRequested: [SESSION_REVOKED],
      defaultSubjects: 'ALL',
      subjects: 0,
    });
    expect(stream.endpoint).to.match(/^http:\/\/127\.0\.0\.1:\d+\/events$/);
    expect(stream.delivery).to.include({ pending: 1, retrying: 1, lastError: 'the push receiver answered 503' });
    expect(stream.delivery.attempts).to.be.at.least(1);
    expect(stream.delivery.awaitingAcknowledgement).to.equal(null);
    expect(stream.delivery.oldestPendingSeconds).to.be.above(0);
    const { body } = await view(TENANT_A);
    expect(body.topics.find((topic: Json) => topic.topic === 'ssf')).to.include({ pending: 1, retrying: 1 });
    expect(body.complete).to.equal(true);
    // Neither the stream's Authorization header nor its endpoint's query is shown.
    expect(JSON.stringify(body)).not.to.match(/push-secret-123|query-secret/);

    listener.refuse = false;
    await listener.setsReceived(1);
    await eventually(async () => {
      stream = (await view(TENANT_A)).body.streams.find((each: Json) => each.streamId === streamId);
      return stream.delivery.pending === 0;
    });
    expect(stream.delivery).to.include({ pending: 0, retrying: 0, lastError: null, nextAttemptAt: null });
    // This node's counts per topic (GET /outbox): the SET's failed attempts and its delivery, given up per reason.
    const after = (await ssfCounts())!;
    expect(after.failures).to.be.above(before.failures);
    expect(after.delivered).to.be.above(before.delivered);
    expect(after.givenUp).to.have.all.keys('max-age', 'tenant-gone');
  });

  it("counts a poll stream's SETs its receiver has not acknowledged", async function () {
    const { streamId, verify } = await streamOf(TENANT_A, POLL);
    expect((await verify()).status).to.equal(204);
    await eventually(async () => {
      const stream = (await view(TENANT_A)).body.streams.find((each: Json) => each.streamId === streamId);
      return stream.delivery.awaitingAcknowledgement === 1 && stream.delivery.pending === 0;
    });
  });

  it("shows a tenant's streams only, to a key confined to it; the server-wide outbox is refused to that key", async function () {
    const { streamId: streamOfB, verify } = await streamOf(TENANT_B, PUSH);
    expect((await verify()).status).to.equal(204);
    const created = await server.admin('POST', '/api-keys', {
      name: `signals-view ${tag}`,
      role: 'read-only',
      tenants: [TENANT_A],
    });
    expect(created.status).to.equal(201);
    const key = created.body.key as string;

    const ofA = await view(TENANT_A, key);
    expect(ofA.status).to.equal(200);
    expect(ofA.body.streams.length).to.be.at.least(1);
    expect(ofA.body.streams.map((each: Json) => each.streamId)).not.to.include(streamOfB);
    // B's SET is in the outbox, failing: not counted in A's topics.
    await eventually(async () => (await view(TENANT_B)).body.topics[0]?.retrying === 1);
    expect((await view(TENANT_A, key)).body.topics.filter((topic: Json) => topic.pending > 0)).to.deep.equal([]);
    expect((await view(TENANT_B)).body.streams.map((each: Json) => each.streamId)).to.deep.equal([streamOfB]);

    expect((await view(TENANT_B, key)).status).to.equal(403);
    const outbox = await server.request('/admin/api/outbox', { key, tenant: TENANT_A });
    expect(outbox.status).to.equal(403);
    expect(((await outbox.json()) as Json).error).to.equal('insufficient_scope');
    expect((await server.admin('GET', '/outbox')).status).to.equal(200);
  });
});
