import { expect } from 'chai';
import { AUDIT_SHAPES_COLLECTION } from '../../src/audit/collections.js';
import { AuditLog, type AuditEntry } from '../../src/audit/log.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { DEFAULT_TENANT, type StoredDoc } from '../../src/store/index.js';
import {
  basic,
  clientCredentials,
  clientToken,
  confidentialClient,
  eventually,
  policyInForce,
  postForm,
} from '../support/oauth.js';
import { readyServer, withServer, type TestServer } from '../support/server.js';
import { preferredBackend, sharedMongoTestServer } from '../store/mongo-server.js';
import { sharedPostgresTestServer } from '../store/postgres-server.js';

/** The entry of the request `requestId`, as the Admin API lists it. */
async function listed(server: TestServer, requestId: string): Promise<AuditEntry[]> {
  const { body } = await server.admin('GET', '/audit-logs?endpoint=/token&size=50&sort=id,desc');
  return (body.content as AuditEntry[]).filter((entry) => entry.requestId === requestId);
}

/** Compaction through each store: a filter on a field left out (null) must match as before. */
function describeCompacted(
  store: string,
  start: () => Promise<{ server: TestServer; stop: () => Promise<void> }>,
): void {
  describe(`entries stored compacted (${store})`, function () {
    let server: TestServer;
    let stop: () => Promise<void>;
    let secret: string;
    const CLIENT = 'audit-size-compact';
    before(async function () {
      ({ server, stop } = await start());
      secret = await confidentialClient(server, CLIENT, { scopes: ['read'] });
    });
    after(async function () {
      await stop?.();
    });

    it('keep what repeats once per distinct value, and read (and replay) as whole entries', async function () {
      // Both requests decided by the same engine (the in-process one, once its Wasm is built): alike.
      await policyInForce(server, 60_000, { inProcess: true });
      const requestIds = ['audit-size-a', 'audit-size-b'];
      for (const requestId of requestIds) {
        const { status } = await clientCredentials(
          server,
          CLIENT,
          secret,
          { scope: 'read' },
          { 'X-Request-ID': requestId },
        );
        expect(status).to.equal(200);
      }
      const raw = server.store.collection<StoredDoc>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
      const stored = await Promise.all(requestIds.map(async (requestId) => (await raw.find({ requestId }))[0]!));
      for (const entry of stored) {
        expect(entry, 'the policy input is not in the entry').not.to.have.property('policyInput');
        expect(entry.shape).to.be.a('string');
        expect(JSON.stringify(entry).length, 'the stored entry').to.be.below(400);
      }
      expect(stored[0]!.shape, 'two alike requests share one shape').to.equal(stored[1]!.shape);
      const shapes = server.store.collection<StoredDoc>(AUDIT_SHAPES_COLLECTION, DEFAULT_TENANT);
      expect(await shapes.get(stored[0]!.shape as string)).to.not.equal(null);

      const entry = (await listed(server, 'audit-size-b'))[0]!;
      expect(entry.policyInput).to.deep.include({ tenant: DEFAULT_TENANT });
      expect((entry.policyInput as { client: { client_id: string } }).client.client_id).to.equal(CLIENT);
      const time = (entry.policyInput as { time: string }).time;
      expect(Math.abs(Date.parse(time) - Date.parse(entry.createdAt)), 'the input time, back').to.be.below(5_000);
      expect(entry.policyDecision).to.include({ allow: true, point: 'token' });
      expect(entry.requestSummary).to.include({ grant_type: 'client_credentials', status: 200 });
      expect(entry.ip).to.be.a('string');
      expect(entry.subjectId).to.equal(null);

      const replay = await server.admin('POST', `/audit-logs/${entry.id}/replay`);
      expect(replay.status, JSON.stringify(replay.body)).to.equal(200);
      expect(replay.body).to.include({ point: 'token', changed: false });
      const decided = await server.admin('POST', '/decisions', { point: 'token', input: entry.policyInput });
      expect(decided.body.decision).to.include({ allow: true });
    });

    it('an entry written whole before compaction still reads and replays', async function () {
      const recent = (await listed(server, 'audit-size-a'))[0]!;
      const { id: _id, createdAt: _createdAt, ...fields } = recent;
      const old = { ...fields, id: 990_000_001, createdAt: new Date().toISOString(), requestId: 'audit-size-old' };
      await server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT).insert(old as AuditEntry);
      const read = await server.admin('GET', '/audit-logs/990000001');
      expect(read.status).to.equal(200);
      expect(read.body.policyInput).to.deep.equal(recent.policyInput);
      const replay = await server.admin('POST', '/audit-logs/990000001/replay');
      expect(replay.status, JSON.stringify(replay.body)).to.equal(200);
      expect(replay.body).to.include({ point: 'token', changed: false });
    });
  });
}

describeCompacted('SQLite', async () => ({ server: await withServer(), stop: async () => {} }));

describeCompacted('PostgreSQL', async () => {
  const postgres = await sharedPostgresTestServer();
  const server = await readyServer({ STORE_URL: postgres.url() });
  return { server, stop: () => server.close() };
});

describeCompacted(`FerretDB over ${preferredBackend()}`, async () => {
  const mongo = await sharedMongoTestServer(preferredBackend());
  const server = await readyServer({ STORE_URL: mongo.uri(mongo.freshDatabase()) });
  return { server, stop: () => server.close() };
});

describe('Audit log sized for production', function () {
  describe('GET /audit-logs?from=&to=', function () {
    const TENANT = 'audit-size-range';
    let server: TestServer;
    before(async function () {
      server = await withServer();
      // 30 entries a minute apart from 09:00 UTC, in a tenant of their own.
      await server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT).insertMany(
        Array.from(
          { length: 30 },
          (_, n) =>
            ({
              id: 970_000_000 + n,
              createdAt: new Date(Date.UTC(2026, 10, 27, 9, n)).toISOString(),
              endpoint: '/token',
              method: 'POST',
              requestSummary: { status: n % 3 === 0 ? 400 : 200 },
              outcome: n % 3 === 0 ? 'deny' : 'allow',
              tenantId: TENANT,
            }) as unknown as AuditEntry,
        ),
      );
    });
    const list = (query: string) => server.admin('GET', `/audit-logs?tenantId=${TENANT}&${query}`);

    it('lists the entries of a time range, both ends included, newest first, a keyset page at a time', async function () {
      const first = await list('from=2026-11-27T09:10:00Z&to=2026-11-27T09:19:00Z&size=4');
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.totalElements).to.equal(10);
      const seen = first.body.content.map((entry: AuditEntry) => entry.id);
      let cursor = first.body.nextCursor;
      while (cursor) {
        const next = await list(`from=2026-11-27T09:10:00Z&to=2026-11-27T09:19:00Z&size=4&cursor=${cursor}`);
        seen.push(...next.body.content.map((entry: AuditEntry) => entry.id));
        cursor = next.body.nextCursor;
      }
      expect(seen).to.deep.equal(Array.from({ length: 10 }, (_, n) => 970_000_019 - n));
      const oldestFirst = await list('from=2026-11-27T09:25:00Z&to=2026-11-27T12:00:00Z&sort=createdAt,asc');
      expect(oldestFirst.body.content.map((entry: AuditEntry) => entry.id)).to.deep.equal(
        Array.from({ length: 5 }, (_, n) => 970_000_025 + n),
      );
    });

    it('combines a range with the outcome, and an offset is the instant it names', async function () {
      const refused = await list('outcome=deny&from=2026-11-27T10:00:00%2B01:00&to=2026-11-27T09:08:00Z');
      expect(refused.body.content.map((entry: AuditEntry) => entry.id)).to.deep.equal([
        970_000_006, 970_000_003, 970_000_000,
      ]);
      expect(refused.body.totalElements).to.equal(3);
    });

    it('refuses a time without its zone, an impossible date and a from after its to, with 400 naming the field', async function () {
      for (const [query, field] of [
        ['from=2026-11-27T09:00', 'from'],
        ['to=yesterday', 'to'],
        ['from=2026-11-27T10:00Z&to=2026-11-27T09:00Z', 'from'],
      ] as const) {
        const { status, body } = await list(query);
        expect(status, query).to.equal(400);
        expect(JSON.stringify(body), query).to.include(field);
      }
    });
  });

  describe('AUDIT_ALLOWED_COUNTED and AUDIT_ALLOWED_UNRECORDED', function () {
    let server: TestServer;
    let rsSecret: string;
    let callerToken: string;
    before(async function () {
      // Its own server: its settings change what every allowed /introspect and /token request leaves.
      server = await readyServer({
        AUDIT_ALLOWED_COUNTED: '/introspect',
        AUDIT_ALLOWED_UNRECORDED: '/revoke',
        AUDIT_AGGREGATE_WINDOW_SECONDS: '1',
      });
      rsSecret = await confidentialClient(server, 'counted-rs', { scopes: ['introspection', 'read'] });
      callerToken = await clientToken(server, 'counted-rs', rsSecret, { scope: 'introspection' });
    });
    after(async function () {
      await server?.close();
    });
    const entriesAt = async (endpoint: string) =>
      (await server.admin('GET', `/audit-logs?endpoint=${endpoint}&size=100`)).body.content as AuditEntry[];

    it('counts allowed introspection in one aggregated entry per window, and records its refusals one by one', async function () {
      for (let n = 0; n < 5; n++) {
        const { status } = await postForm(
          server,
          '/introspect',
          { token: callerToken },
          { Authorization: `Bearer ${callerToken}` },
        );
        expect(status).to.equal(200);
      }
      const refused = await postForm(
        server,
        '/introspect',
        { token: callerToken },
        { Authorization: basic('counted-rs', 'a-wrong-secret'), 'X-Request-ID': 'audit-size-refused' },
      );
      expect(refused.status).to.equal(401);
      let aggregated: AuditEntry[] = [];
      await eventually(async () => {
        aggregated = (await entriesAt('/introspect')).filter(
          (entry) => entry.requestSummary.kind === 'aggregated' && entry.outcome === 'allow',
        );
        return aggregated.reduce((sum, entry) => sum + Number(entry.requestSummary.count), 0) === 5;
      }, 10_000);
      expect(aggregated[0]).to.include({ clientId: 'counted-rs', method: 'POST' });
      const each = await entriesAt('/introspect');
      expect(
        each.filter((entry) => entry.requestSummary.kind !== 'aggregated').map((entry) => entry.requestId),
      ).to.deep.equal(['audit-size-refused']);
    });

    it('writes no entry for allowed revocation, still one for a refused one and for every Admin API call', async function () {
      const token = await clientToken(server, 'counted-rs', rsSecret, { scope: 'read' });
      const revoked = await postForm(server, '/revoke', { token }, { Authorization: basic('counted-rs', rsSecret) });
      expect(revoked.status).to.equal(200);
      const refused = await postForm(
        server,
        '/revoke',
        { token },
        { Authorization: basic('counted-rs', 'a-wrong-secret') },
      );
      expect(refused.status).to.equal(401);
      let entries: AuditEntry[] = [];
      await eventually(async () => (entries = await entriesAt('/revoke')).length > 0, 5_000);
      expect(entries.map((entry) => entry.outcome)).to.deep.equal(['deny']);
      const tokens = await entriesAt('/token');
      expect(tokens.length, 'other endpoints keep an entry each').to.be.at.least(2);
      const admin = await entriesAt('/admin/api/clients');
      expect(admin.length, 'the Admin API call that made the client').to.be.at.least(1);
    });

    it('refuses an endpoint the audit log does not know, naming the setting', async function () {
      const refused = readyServer({ AUDIT_ALLOWED_COUNTED: '/admin/api/clients' });
      let error: unknown;
      try {
        await (await refused).close();
      } catch (caught) {
        error = caught;
      }
      expect(String(error)).to.match(/AUDIT_ALLOWED_COUNTED/);
    });
  });

  describe('AUDIT_RETENTION_MAX_MB', function () {
    let server: TestServer;
    before(async function () {
      // Its own server: its purge deletes the oldest entries of its store.
      server = await readyServer({ AUDIT_RETENTION_MAX_MB: '1', PURGE_INTERVAL_SECONDS: '1' });
    });
    after(async function () {
      await server?.close();
    });

    it('deletes the oldest entries beyond the bound in the background, and keeps the newest', async function () {
      const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
      const start = Date.now() - 86_400_000;
      const payload = 'x'.repeat(400);
      // 5,000 entries of ~700 bytes stored and ~1 KB counted: about 5 MB, five times the bound.
      for (let from = 0; from < 5_000; from += 1_000)
        await entries.insertMany(
          Array.from(
            { length: 1_000 },
            (_, n) =>
              ({
                id: 960_000_000 + from + n,
                createdAt: new Date(start + from + n).toISOString(),
                endpoint: '/token',
                method: 'POST',
                requestSummary: { payload },
                outcome: 'allow',
                tenantId: 'audit-size-bound',
              }) as unknown as AuditEntry,
          ),
        );
      let left = Infinity;
      await eventually(async () => (left = await entries.count({ tenantId: 'audit-size-bound' })) < 2_000, 20_000);
      expect(left).to.be.above(500);
      expect(await entries.get(960_004_999), 'the newest stays').to.not.equal(null);
      expect(await entries.get(960_000_000), 'the oldest went').to.equal(null);
    });

    it('through the audit log: nothing goes while the log is within the bound', async function () {
      expect(await new AuditLog(server.store).purgeBeyondSize(1024 * 1024 * 1024)).to.equal(0);
    });
  });
});
