import { expect } from 'chai';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OUTBOX_COLLECTION } from '../../src/outbox/index.js';
import { ssfStreams } from '../../src/signals/streams.js';
import { clientWithToken, confidentialClient, eventually } from '../support/oauth.js';
import { readyServer, withServer, type TestServer } from '../support/server.js';
import { sharedPostgresTestServer } from '../store/postgres-server.js';
import { eventOf, pollSets, PushReceiver, SetVerifier } from '../support/ssf-receiver.js';

/**
 * The Shared Signals transmitter (src/signals) through real HTTP: a receiver (a client of the
 * tenant with ssf.manage) makes streams at its path tenant's transmitter; Admin changes reach it
 * as SETs that a push receiver and a poller written here verify against the tenant's jwks_uri.
 */
const TENANT = 'ssf-transmitter';
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const CREDENTIAL_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/credential-change';
const ACCOUNT_DISABLED = 'https://schemas.openid.net/secevent/risc/event-type/account-disabled';
const ACCOUNT_ENABLED = 'https://schemas.openid.net/secevent/risc/event-type/account-enabled';
const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
const PUSH = 'urn:ietf:rfc:8935';
const POLL = 'urn:ietf:rfc:8936';

describe('Shared Signals transmitter (SSF 1.0, CAEP, RISC)', function () {
  let server: TestServer;
  let issuer: string;
  let receiver: PushReceiver;
  let pushUrl: string;
  let token: string;
  const at = (path: string) => `/t/${TENANT}${path}`;
  const call = async (method: string, path: string, json?: unknown, bearer = token) => {
    const response = await server.request(at(path), {
      method,
      headers: { authorization: `Bearer ${bearer}` },
      ...(json === undefined ? {} : { json }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
  /** The outbox's failing entry of a stream, once there is one (GET /admin/api/outbox). */
  const failingEntryOf = async (streamId: string) => {
    const key = `ssf:${TENANT}:${streamId}`;
    let failing: any;
    await eventually(async () => {
      const { body } = await server.admin('GET', '/outbox');
      failing = body.failingEntries.find((entry: any) => entry.stream === key);
      return failing !== undefined;
    });
    return failing;
  };
  const admin = (method: string, path: string, json?: unknown) =>
    server.admin(method, `${path}${path.includes('?') ? '&' : '?'}tenantId=${TENANT}`, json);

  before(async function () {
    server = await withServer({ OUTBOX_POLL_MS: '200' });
    issuer = `${server.config.issuer}/t/${TENANT}`;
    receiver = new PushReceiver();
    pushUrl = await receiver.start();
    receiver.verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'ssf-receiver');
    ({ token } = await clientWithToken(server, 'ssf-receiver', ['ssf.manage'], {}, TENANT));
  });
  after(async function () {
    await receiver?.close();
  });

  it('publishes the transmitter metadata at the path-inserted well-known URI of the tenant', async function () {
    const response = await server.request(`/.well-known/ssf-configuration/t/${TENANT}`);
    expect(response.status).to.equal(200);
    const metadata = (await response.json()) as Record<string, unknown>;
    expect(metadata).to.include({ spec_version: '1_0', issuer, jwks_uri: `${issuer}/.well-known/jwks.json` });
    expect(metadata.delivery_methods_supported).to.have.members([PUSH, POLL]);
    expect(metadata.configuration_endpoint).to.equal(`${issuer}/ssf/streams`);
    expect(metadata.authorization_schemes).to.deep.equal([{ spec_urn: 'urn:ietf:rfc:6749' }]);
  });

  it('refuses stream management without a token holding ssf.manage', async function () {
    expect((await call('GET', '/ssf/streams', undefined, 'not-a-token')).status).to.equal(401);
    const { token: reader } = await clientWithToken(server, 'ssf-reader-only', ['ssf.read'], {}, TENANT);
    const refused = await call('POST', '/ssf/streams', { delivery: { method: POLL } }, reader);
    expect(refused.status).to.equal(403);
    expect((await call('GET', '/ssf/streams', undefined, reader)).status).to.equal(200);
  });

  it('creates, reads, updates, replaces and deletes a stream; another receiver cannot see it', async function () {
    const created = await call('POST', '/ssf/streams', {
      delivery: { method: PUSH, endpoint_url: pushUrl },
      events_requested: [SESSION_REVOKED, 'urn:example:unknown'],
      description: 'crud',
    });
    expect(created.status).to.equal(201);
    expect(created.body).to.include({ iss: issuer, aud: 'ssf-receiver', description: 'crud' });
    expect(created.body.events_delivered).to.deep.equal([SESSION_REVOKED]);
    const id = created.body.stream_id as string;
    expect((await call('GET', `/ssf/streams?stream_id=${id}`)).body.stream_id).to.equal(id);
    const patched = await call('PATCH', '/ssf/streams', { stream_id: id, events_requested: [CREDENTIAL_CHANGE] });
    expect(patched.status).to.equal(200);
    expect(patched.body).to.include({ description: 'crud' });
    expect(patched.body.events_delivered).to.deep.equal([CREDENTIAL_CHANGE]);
    const replaced = await call('PUT', '/ssf/streams', { stream_id: id, delivery: { method: POLL } });
    expect(replaced.body.delivery).to.deep.equal({ method: POLL, endpoint_url: `${issuer}/ssf/poll/${id}` });
    expect(replaced.body).not.to.have.property('description');
    const { token: other } = await clientWithToken(server, 'ssf-other-receiver', ['ssf.manage'], {}, TENANT);
    expect((await call('GET', `/ssf/streams?stream_id=${id}`, undefined, other)).status).to.equal(404);
    expect((await call('DELETE', `/ssf/streams?stream_id=${id}`, undefined, other)).status).to.equal(404);
    expect((await call('DELETE', `/ssf/streams?stream_id=${id}`)).status).to.equal(204);
    expect((await call('GET', `/ssf/streams?stream_id=${id}`)).status).to.equal(404);
  });

  it('refuses a malformed stream with a 400, never a 500', async function () {
    const noEndpoint = await call('POST', '/ssf/streams', { delivery: { method: PUSH } });
    expect(noEndpoint.status).to.equal(400);
    const ftp = await call('POST', '/ssf/streams', { delivery: { method: PUSH, endpoint_url: 'ftp://x.example/' } });
    expect(ftp.status).to.equal(400);
    expect((await call('POST', '/ssf/streams', { delivery: { method: 'urn:x' } })).status).to.equal(400);
    // An authorization header no push could send (found 2026-11-30: accepted, then every delivery failed).
    for (const header of ['Bearer x\r\nX-Injected: yes', 'Bearer é€']) {
      const unsendable = await call('POST', '/ssf/streams', {
        delivery: { method: PUSH, endpoint_url: pushUrl, authorization_header: header },
      });
      expect(unsendable.status, JSON.stringify(header)).to.equal(400);
      expect(unsendable.body.error).to.equal('invalid_request');
    }
    expect((await call('POST', '/ssf/subjects/add', { stream_id: 'nope', subject: { format: 'x' } })).status).to.equal(
      400,
    );
  });

  it('pushes a verified session-revoked and account-disabled SET when a covered client is disabled, account-enabled when enabled again', async function () {
    await confidentialClient(server, 'ssf-watched-app', {}, TENANT);
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: PUSH, endpoint_url: pushUrl, authorization_header: 'Bearer receiver-secret' },
      events_requested: [SESSION_REVOKED, ACCOUNT_DISABLED, ACCOUNT_ENABLED],
      default_subjects: 'NONE',
    });
    const streamId = stream.body.stream_id as string;
    const subject = { format: 'opaque', id: 'ssf-watched-app' };
    expect((await call('POST', '/ssf/subjects/add', { stream_id: streamId, subject })).status).to.equal(200);
    const before = receiver.received.length;
    const app = (await admin('GET', '/clients/ssf-watched-app')).body;
    expect((await admin('PUT', '/clients/ssf-watched-app', { ...app, enabled: false })).status).to.equal(200);
    const sets = (await receiver.setsReceived(before + 2)).slice(before);
    expect(sets.map((set) => eventOf(set).type)).to.deep.equal([SESSION_REVOKED, ACCOUNT_DISABLED]);
    for (const set of sets) {
      expect(set.payload.sub_id).to.deep.equal(subject);
      expect(set.header.typ).to.equal('secevent+jwt');
    }
    expect(eventOf(sets[0]!).data).to.include({ initiating_entity: 'admin' });
    expect(receiver.requests.at(-1)).to.deep.equal({
      contentType: 'application/secevent+jwt',
      authorization: 'Bearer receiver-secret',
    });
    const disabledApp = (await admin('GET', '/clients/ssf-watched-app')).body;
    const reenabled = await admin('PUT', '/clients/ssf-watched-app', { ...disabledApp, enabled: true });
    expect(reenabled.status, JSON.stringify(reenabled.body)).to.equal(200);
    const enabled = (await receiver.setsReceived(before + 3)).slice(before + 2)[0]!;
    expect(eventOf(enabled).type).to.equal(ACCOUNT_ENABLED);
    // The Authorization header the receiver gave is a secret: it is not shown back.
    expect(JSON.stringify((await call('GET', `/ssf/streams?stream_id=${streamId}`)).body)).not.to.include(
      'receiver-secret',
    );
    await call('DELETE', `/ssf/streams?stream_id=${streamId}`);
  });

  it('sends nothing of a subject a default_subjects NONE stream was not given; everything to one that covers all (the default)', async function () {
    await confidentialClient(server, 'ssf-uncovered-app', {}, TENANT);
    const narrow = await call('POST', '/ssf/streams', {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
      default_subjects: 'NONE',
    });
    const wide = await call('POST', '/ssf/streams', {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
    });
    expect(wide.body.default_subjects).to.equal('ALL');
    expect((await admin('POST', '/clients/ssf-uncovered-app/revoke-tokens')).status).to.equal(200);
    const verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'ssf-receiver');
    const widePolled = async () => pollSets(wide.body.delivery.endpoint_url, token, verifier);
    let sets = await widePolled();
    while (sets.sets.size === 0) sets = await widePolled();
    const set = [...sets.sets.values()][0]!;
    expect(eventOf(set).type).to.equal(SESSION_REVOKED);
    expect(set.payload.sub_id).to.deep.equal({ format: 'opaque', id: 'ssf-uncovered-app' });
    expect((await pollSets(narrow.body.delivery.endpoint_url, token, verifier)).sets.size).to.equal(0);
    for (const stream of [narrow, wide]) await call('DELETE', `/ssf/streams?stream_id=${stream.body.stream_id}`);
  });

  // Found 2026-11-29: a client disabled or deleted kept getting the tenant's SETs, and a client made
  // again under its client_id took its stream over.
  it('sends nothing to a stream whose client is disabled, and a client made again under its client_id gets no earlier stream', async function () {
    const { token: goneToken } = await clientWithToken(server, 'ssf-gone', ['ssf.manage'], {}, TENANT);
    const gone = await call(
      'POST',
      '/ssf/streams',
      { delivery: { method: POLL }, events_requested: [SESSION_REVOKED] },
      goneToken,
    );
    const live = await call('POST', '/ssf/streams', {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
    });
    const record = (await admin('GET', '/clients/ssf-gone')).body;
    const { id: _id, createdAt: _c, updatedAt: _u, tenantId: _t, ...fields } = record;
    expect((await admin('PUT', '/clients/ssf-gone', { ...fields, enabled: false })).status).to.equal(200);
    await confidentialClient(server, 'ssf-gone-victim', {}, TENANT);
    expect((await admin('POST', '/clients/ssf-gone-victim/revoke-tokens')).status).to.equal(200);
    const verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'ssf-receiver');
    await eventually(async () =>
      [...(await pollSets(live.body.delivery.endpoint_url, token, verifier)).sets.values()].some(
        (set) => (set.payload.sub_id as { id?: string }).id === 'ssf-gone-victim',
      ),
    );
    // Appended in one write with the live stream's, had it been: pending in the outbox, or queued for its poller.
    const key = `ssf:${TENANT}:${gone.body.stream_id}`;
    expect(await server.store.collection(OUTBOX_COLLECTION, '_default').count({ stream: key }), 'pending').to.equal(0);
    expect(
      await server.store.collection('ssf_poll', TENANT).count({ streamId: gone.body.stream_id }),
      'queued',
    ).to.equal(0);

    // It held as many streams as a receiver may: the client made again under its client_id gets its own.
    for (let made = 1; made < 10; made += 1)
      await ssfStreams(server.store, TENANT).insert({
        ...(await ssfStreams(server.store, TENANT).get(gone.body.stream_id))!,
        id: `ssf-gone-${made}`,
      });
    expect((await admin('DELETE', '/clients/ssf-gone')).status).to.equal(204);
    const { token: againToken } = await clientWithToken(server, 'ssf-gone', ['ssf.manage'], {}, TENANT);
    expect((await call('GET', '/ssf/streams', undefined, againToken)).body).to.deep.equal([]);
    const earlier = await call('GET', `/ssf/streams?stream_id=${gone.body.stream_id}`, undefined, againToken);
    expect(earlier.status).to.equal(404);
    const own = await call(
      'POST',
      '/ssf/streams',
      { delivery: { method: POLL }, events_requested: [SESSION_REVOKED] },
      againToken,
    );
    expect(own.status, JSON.stringify(own.body)).to.equal(201);
    await call('DELETE', `/ssf/streams?stream_id=${live.body.stream_id}`);
  });

  it('sends session-revoked for each user of an identity provider that is disabled, as iss_sub', async function () {
    const idp = await admin('POST', '/identity-providers', {
      issuer: 'https://idp.ssf-transmitter.example',
      idpId: 'ssf-corp',
    });
    expect(idp.status, JSON.stringify(idp.body)).to.equal(201);
    for (const subjectId of ['ssf-idp-user-1', 'ssf-idp-user-2'])
      expect((await admin('POST', '/subjects', { subjectId, identityProviderId: idp.body.id })).status).to.equal(201);
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
    });
    const stored = (await admin('GET', '/identity-providers/ssf-corp')).body;
    expect((await admin('PUT', '/identity-providers/ssf-corp', { ...stored, enabled: false })).status).to.equal(200);
    const verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'ssf-receiver');
    const subjects: unknown[] = [];
    await eventually(async () => {
      const polled = await pollSets(stream.body.delivery.endpoint_url, token, verifier);
      subjects.splice(0, subjects.length, ...[...polled.sets.values()].map((set) => set.payload.sub_id));
      return subjects.length >= 2;
    });
    expect(subjects).to.have.deep.members([
      { format: 'iss_sub', iss: issuer, sub: 'ssf-idp-user-1' },
      { format: 'iss_sub', iss: issuer, sub: 'ssf-idp-user-2' },
    ]);
    await call('DELETE', `/ssf/streams?stream_id=${stream.body.stream_id}`);
  });

  /** A client `clientId` of the tenant, and a poll stream of every subject's credential changes, with a verifier of its SETs. */
  const credentialChangesPolled = async (clientId: string) => {
    await confidentialClient(server, clientId, {}, TENANT);
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: POLL },
      events_requested: [CREDENTIAL_CHANGE],
      default_subjects: 'ALL',
    });
    const verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'ssf-receiver');
    return { stream, endpoint: stream.body.delivery.endpoint_url as string, verifier };
  };

  it('polls in order (RFC 8936): maxEvents, moreAvailable, acknowledgements; credential-change on a secret rotation', async function () {
    const { stream, endpoint, verifier } = await credentialChangesPolled('ssf-rotated-app');
    for (let rotation = 0; rotation < 3; rotation += 1)
      expect((await admin('POST', '/clients/ssf-rotated-app/secret')).status).to.equal(200);
    let first = await pollSets(endpoint, token, verifier, { maxEvents: 2 });
    while (!first.moreAvailable) first = await pollSets(endpoint, token, verifier, { maxEvents: 2 });
    expect(first.sets.size).to.equal(2);
    for (const set of first.sets.values())
      expect(eventOf(set).data).to.include({ credential_type: 'client_secret', change_type: 'update' });
    const acked = [...first.sets.keys()];
    const [firstIat, secondIat] = [...first.sets.values()].map((set) => set.payload.iat!);
    expect(firstIat).to.be.at.most(secondIat!);
    const rest = await pollSets(endpoint, token, verifier, { ack: acked });
    expect([...rest.sets.keys()])
      .to.have.length(1)
      .and.not.include.members(acked);
    const empty = await pollSets(endpoint, token, verifier, { ack: [...rest.sets.keys()] });
    expect(empty.sets.size).to.equal(0);
    expect(empty.moreAvailable).to.equal(false);
    await call('DELETE', `/ssf/streams?stream_id=${stream.body.stream_id}`);
  });

  it('holds one poll of a stream open at a time (RFC 8936 returnImmediately false): another is refused 429 meanwhile', async function () {
    const { stream, endpoint, verifier } = await credentialChangesPolled('ssf-held-app');
    const held = pollSets(endpoint, token, verifier, { returnImmediately: false });
    // Until the first is held, a second may be held instead: it is then cut off after a second
    // (its receiver gone, the server lets its place go) and asked again.
    let second: Response | undefined;
    await eventually(async () => {
      second = await fetch(endpoint, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ returnImmediately: false }),
        signal: AbortSignal.timeout(1_000),
      }).catch(() => undefined);
      return second?.status === 429;
    });
    expect(second!.headers.get('retry-after')).to.equal('1');
    expect(((await second!.json()) as { error: string }).error).to.equal('too_many_requests');
    // The held poll answers the SET queued meanwhile.
    expect((await admin('POST', '/clients/ssf-held-app/secret')).status).to.equal(200);
    const answered = await held;
    expect(answered.status).to.equal(200);
    expect(answered.sets.size).to.equal(1);
    await call('DELETE', `/ssf/streams?stream_id=${stream.body.stream_id}`);
  });

  it('holds the SETs of a paused stream and delivers them once it is enabled again; verification events on request', async function () {
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: PUSH, endpoint_url: pushUrl },
      events_requested: [SESSION_REVOKED],
    });
    const streamId = stream.body.stream_id as string;
    const paused = await call('POST', '/ssf/status', { stream_id: streamId, status: 'paused', reason: 'maintenance' });
    expect(paused.body).to.deep.equal({ stream_id: streamId, status: 'paused', reason: 'maintenance' });
    expect((await call('GET', `/ssf/status?stream_id=${streamId}`)).body.status).to.equal('paused');
    const before = receiver.received.length;
    expect((await call('POST', '/ssf/verify', { stream_id: streamId, state: 'abc' })).status).to.equal(204);
    expect((await call('POST', '/ssf/verify', { stream_id: streamId })).status).to.equal(429);
    expect((await call('POST', '/ssf/status', { stream_id: streamId, status: 'enabled' })).status).to.equal(200);
    const verification = (await receiver.setsReceived(before + 1)).slice(before)[0]!;
    expect(eventOf(verification)).to.deep.equal({ type: VERIFICATION, data: { state: 'abc' } });
    expect(verification.payload.sub_id).to.deep.equal({ format: 'opaque', id: streamId });
    await call('DELETE', `/ssf/streams?stream_id=${streamId}`);
  });

  it('refuses a verification while the stream has SETs waiting, so that asking again and again fills no outbox', async function () {
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: PUSH, endpoint_url: pushUrl },
      events_requested: [SESSION_REVOKED],
    });
    const streamId = stream.body.stream_id as string;
    expect((await call('POST', '/ssf/status', { stream_id: streamId, status: 'paused' })).status).to.equal(200);
    // Ten SETs held for the paused stream, as its tenant's events would leave them.
    const entries = server.store.collection(OUTBOX_COLLECTION, '_default');
    const key = `ssf:${TENANT}:${streamId}`;
    const held = Array.from({ length: 10 }, (_, index) => ({
      id: 900_000_000 + index,
      topic: 'ssf',
      stream: key,
      payload: {},
      createdAt: Date.now(),
      attempts: 0,
      notBefore: Date.now() + 3600_000,
    }));
    await entries.insertMany(held);
    try {
      const refused = await call('POST', '/ssf/verify', { stream_id: streamId });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(429);
      expect(refused.body.error_description).to.contain('SETs waiting');
    } finally {
      await call('DELETE', `/ssf/streams?stream_id=${streamId}`);
    }
    expect(await entries.getMany(held.map((entry) => entry.id)), 'gone with the stream').to.deep.equal([]);
  });

  it('follows no redirect of a push endpoint: the attempt fails, the place redirected to is never reached', async function () {
    let reached = 0;
    const elsewhere = createServer((_request, response) => {
      reached += 1;
      response.writeHead(202).end();
    });
    const redirecting = createServer((_request, response) => {
      const { port } = elsewhere.address() as AddressInfo;
      response.writeHead(307, { location: `http://127.0.0.1:${port}/ssf` }).end();
    });
    for (const listener of [elsewhere, redirecting])
      await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: PUSH, endpoint_url: `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/ssf` },
      events_requested: [SESSION_REVOKED],
    });
    try {
      expect((await call('POST', '/ssf/verify', { stream_id: stream.body.stream_id })).status).to.equal(204);
      const failing = await failingEntryOf(stream.body.stream_id);
      expect(failing.lastError).to.contain('answered with a redirect');
      expect(reached).to.equal(0);
    } finally {
      await call('DELETE', `/ssf/streams?stream_id=${stream.body.stream_id}`);
      for (const listener of [elsewhere, redirecting]) listener.close();
    }
  });

  it('shows the outbox in /metrics and GET /admin/api/outbox, a failing entry with why', async function () {
    const down = new PushReceiver();
    down.refuse = true;
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: PUSH, endpoint_url: await down.start() },
      events_requested: [SESSION_REVOKED],
    });
    try {
      expect((await call('POST', '/ssf/verify', { stream_id: stream.body.stream_id })).status).to.equal(204);
      const failing = await failingEntryOf(stream.body.stream_id);
      expect(failing).to.include({ topic: 'ssf', lastError: 'the push receiver answered 503' });
      expect(failing.attempts).to.be.at.least(1);
      const metrics = await (await server.request('/metrics')).text();
      expect(metrics).to.match(/^arbiter_outbox_pending [1-9]\d*/m);
      expect(metrics).to.match(/^arbiter_outbox_failing [1-9]\d*/m);
      expect(metrics).to.match(/^arbiter_outbox_lag_seconds [\d.]+/m);
      // Counted per topic: SET deliveries apart from logout tokens and policy rechecks.
      expect(metrics).to.match(/^arbiter_outbox_failures_total\{topic="ssf"\} [1-9]\d*/m);
      expect(metrics).to.match(/^arbiter_outbox_delivered_total\{topic="ssf"\} [1-9]\d*/m);
    } finally {
      // A deleted stream's entries go with it.
      await call('DELETE', `/ssf/streams?stream_id=${stream.body.stream_id}`);
      await down.close();
    }
  });
});

/** Stream changes from requests made at once, on a store whose reads and writes really interleave. */
describe('Shared Signals transmitter: stream changes at once (PostgreSQL)', function () {
  this.timeout(120_000);
  let server: TestServer;
  let token: string;
  const call = async (method: string, path: string, json?: unknown) => {
    const response = await server.request(`/t/${TENANT}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      ...(json === undefined ? {} : { json }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
  before(async function () {
    // Its own server: SQLite answers each request's reads and writes at once, so requests never interleave there.
    server = await readyServer({ STORE_URL: (await sharedPostgresTestServer()).url() });
    ({ token } = await clientWithToken(server, 'ssf-receiver', ['ssf.manage'], {}, TENANT));
  });
  after(async function () {
    await server?.close();
  });

  it('keeps every subject of adds made at once, and refuses a stream change made over a concurrent one (409)', async function () {
    const stream = await call('POST', '/ssf/streams', {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
      default_subjects: 'NONE',
    });
    const streamId = stream.body.stream_id as string;
    const subjects = Array.from({ length: 8 }, (_, n) => ({ format: 'opaque', id: `ssf-concurrent-${n}` }));
    const added = await Promise.all(
      subjects.map((subject) => call('POST', '/ssf/subjects/add', { stream_id: streamId, subject })),
    );
    expect(added.map((answer) => answer.status)).to.deep.equal(subjects.map(() => 200));
    // Before, each add wrote the subjects it had read plus its own: all answered 200, most were lost.
    const stored = await ssfStreams(server.store, TENANT).get(streamId);
    expect(stored!.subjects).to.have.deep.members(subjects);
    // A status change and a configuration change at once: each is either made over the other or refused.
    const [paused, patched] = await Promise.all([
      call('POST', '/ssf/status', { stream_id: streamId, status: 'paused' }),
      call('PATCH', '/ssf/streams', { stream_id: streamId, description: 'changed at once' }),
    ]);
    const after = (await ssfStreams(server.store, TENANT).get(streamId))!;
    if (paused.status === 200) expect(after.status, 'the pause is kept').to.equal('paused');
    else expect(paused.status).to.equal(409);
    if (patched.status === 200) expect(after.description).to.equal('changed at once');
    else expect(patched.status).to.equal(409);
    expect(after.subjects, 'no change took the subjects back').to.have.deep.members(subjects);
    await call('DELETE', `/ssf/streams?stream_id=${streamId}`);
  });
});
