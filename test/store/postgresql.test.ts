import { expect } from 'chai';
import { PolicySnapshots } from '../../src/policy/bundle/snapshots.js';
import { openArbiterStore } from '../../src/collections.js';
import { openStore } from '../../src/store/open.js';
import { clientsCollection, findClientRecord, type ClientRecord } from '../../src/oauth/clients/records.js';
import { DEFAULT_TENANT, isStoreUnavailable, type Store } from '../../src/store/types.js';
import { log, putData } from '../policy/support.js';
import { describeStoreConformance } from './conformance.js';
import { eventually } from '../support/oauth.js';
import { OIDC_COLLECTION } from '../../adapters/oidc/collection.js';
import { PostgresTestServer, sharedPostgresTestServer } from './postgres-server.js';

describe('PostgreSQL store', function () {
  let server: PostgresTestServer;

  before(async function () {
    this.timeout(120_000); // initdb and the first start
    server = await sharedPostgresTestServer();
  });

  // A schema of its own per test, with only the collections the test declares.
  describeStoreConformance('postgresql', () => openStore(server.url()));

  // Found 2026-11-29: a step named its rows by ctid, which a row another transaction updates
  // meanwhile leaves: the step deleted fewer than it found, and a paced sweep of a user's tokens
  // took that for the end, leaving most of them.
  it('deletes every row a limited deleteMany found, also one another transaction updated meanwhile', async function () {
    const store = await openStore(server.url());
    const other = await (store as unknown as { pool: import('pg').Pool }).pool.connect();
    try {
      const rows = store.collection('sweeps', 't');
      await rows.insertMany(Array.from({ length: 30 }, (_, index) => ({ id: `r${index}`, owner: 'alice' })));
      await other.query('BEGIN');
      await other.query(`UPDATE c_sweeps SET doc = doc || '{"touched": 1}'::jsonb WHERE tenant = 't' AND id = 'r5'`);
      const step = rows.deleteMany({ owner: 'alice' }, 20);
      // The step waits for the row lock of the update, which then commits.
      await eventually(
        async () => Number((await other.query('SELECT count(*) AS n FROM pg_locks WHERE NOT granted')).rows[0].n) > 0,
        20_000,
      );
      await other.query('COMMIT');
      expect(await step).to.equal(20);
      expect(await rows.deleteMany({ owner: 'alice' }, 20)).to.equal(10);
    } finally {
      other.release();
      await store.close();
    }
  });

  // Found 2026-11-29: sorted with its nulls first and `seq` to break ties, a bounded page by key
  // sorted every artefact of the user: a logout over 100,000 took 4.9 s.
  it("reads a bounded page of a user's artefacts by key in the index's order, without sorting them", async function () {
    const store = await openStore(server.url());
    const internals = store as unknown as {
      query(text: string, values?: unknown[]): Promise<unknown>;
      pool: import('pg').Pool;
    };
    const query = internals.query.bind(store);
    let asked: { text: string; values: unknown[] } | undefined;
    internals.query = (text: string, values: unknown[] = []) => {
      if (text.startsWith('SELECT doc')) asked = { text, values };
      return query(text, values);
    };
    try {
      const artefacts = store.collection(OIDC_COLLECTION, 't');
      await artefacts.insertMany(
        Array.from({ length: 300 }, (_, index) => ({
          id: `AccessToken:${index}`,
          accountId: 'alice',
          model: 'AccessToken',
        })),
      );
      await artefacts.find(
        { accountId: 'alice' },
        { sort: { field: 'id', direction: 'asc' }, startAt: '', limit: 100 },
      );
      // A table this small is read whole at any rate: what matters is that the index can give the order.
      const client = await internals.pool.connect();
      let steps: string;
      try {
        await client.query('BEGIN');
        await client.query('SET LOCAL enable_seqscan = off');
        const plan = await client.query({ text: `EXPLAIN ${asked!.text}`, values: asked!.values });
        steps = plan.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      expect(steps).to.match(/Index Scan using \S*accountId_id/);
      expect(steps).not.to.match(/Sort/);
    } finally {
      await store.close();
    }
  });

  it('creates the tables of every known collection when it is opened, with typed columns and unique indexes per tenant', async function () {
    if (!server.directory) this.skip(); // psql needs the cluster of this run
    const schema = server.freshSchema();
    const store = await openArbiterStore(server.url(schema));
    try {
      const columns = server.sql(
        `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = '${schema}' AND table_name = 'c_clients' ORDER BY ordinal_position`,
      );
      expect(columns.slice(0, 4)).to.deep.equal([
        ['tenant', 'text'],
        ['id', 'text'],
        ['doc', 'jsonb'],
        ['expires_at', 'bigint'],
      ]);
      const unique = server.sql(
        `SELECT indexdef FROM pg_indexes WHERE schemaname = '${schema}' AND indexdef LIKE 'CREATE UNIQUE INDEX %' AND indexname LIKE '%\\_uq\\_%'`,
      );
      expect(unique.length).to.be.above(0);
      for (const [definition] of unique) expect(definition).to.match(/\(tenant, /);
    } finally {
      await store.close();
    }
  });

  it('stores several rows with one statement and no transaction around it (insertMany: an audit batch)', async function () {
    if (!server.directory) this.skip(); // pg_stat_statements of the cluster of this run
    const store = await openStore(server.url());
    try {
      const codes = store.collection({ name: 'codes' });
      await codes.insert({ id: 'first' }); // the table exists, the pool has a connection
      server.sql('SELECT pg_stat_statements_reset()');
      await codes.insertMany([{ id: 1 }, { id: 2 }, { id: 3 }]);
      const statements = server.sql(
        "SELECT split_part(query, ' ', 1), calls FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'",
      );
      expect(statements).to.deep.equal([['INSERT', '1']]);
      expect(await codes.count()).to.equal(4);
    } finally {
      await store.close();
    }
  });

  it('joins the upserts of one table made meanwhile into one statement, each caller answered after it, a refused row alone', async function () {
    if (!server.directory) this.skip(); // pg_stat_statements of the cluster of this run
    const store = await openStore(server.url());
    try {
      const tokens = store.collection({ name: 'tokens', uniqueKeys: [['jti']] });
      await tokens.upsert({ id: 'warm', jti: 'warm' }); // the table exists, the pool has a connection
      server.sql('SELECT pg_stat_statements_reset()');
      const upserts = Array.from({ length: 32 }, (_, index) => tokens.upsert({ id: `t${index}`, jti: `j${index}` }));
      // Two upserts of one row at once: the later one stays, as one after the other.
      upserts.push(tokens.upsert({ id: 't0', jti: 'j0', value: 'later' }));
      await Promise.all(upserts);
      const statements = server.sql(
        "SELECT split_part(query, ' ', 1), calls FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'",
      );
      expect(statements).to.deep.equal([['INSERT', '1']]);
      expect(await tokens.count()).to.equal(33);
      expect(await tokens.get('t0')).to.deep.include({ value: 'later' });
      // A row refused for its own sake (a unique key another row holds) fails alone; its batch is stored.
      const outcomes = await Promise.allSettled([
        tokens.upsert({ id: 'u1', jti: 'u1' }),
        tokens.upsert({ id: 'clash', jti: 'j5' }),
        tokens.upsert({ id: 'u2', jti: 'u2' }),
      ]);
      expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
      expect((outcomes[1] as PromiseRejectedResult).reason).to.have.property('name', 'ConflictError');
      expect((await tokens.getMany(['u1', 'u2', 'clash'])).map((doc) => doc.id).sort()).to.deep.equal(['u1', 'u2']);
    } finally {
      await store.close();
    }
  });

  it('refuses an upsert of a value holding U+0000 as a failed write (a rejection, not a throw), the others of its moment stored', async function () {
    const store = await openStore(server.url(server.freshSchema()));
    try {
      const tokens = store.collection('tokens');
      const refused = (() => {
        try {
          return tokens.upsert({ id: 'nul', note: 'a\u0000b' });
        } catch (error) {
          return Promise.resolve({ thrown: error });
        }
      })();
      const outcomes = await Promise.allSettled([refused, tokens.upsert({ id: 'fine', note: 'ok' })]);
      expect(outcomes[0]).to.have.property('status', 'rejected');
      expect((outcomes[0] as PromiseRejectedResult).reason).to.be.instanceOf(TypeError);
      expect(outcomes[1]).to.have.property('status', 'fulfilled');
      expect((await tokens.getMany(['nul', 'fine'])).map((doc) => doc.id)).to.deep.equal(['fine']);
    } finally {
      await store.close();
    }
  });

  it("announces a policy write to another node's kept snapshot within 100 ms (LISTEN/NOTIFY), where its poll would wait a minute", async function () {
    const schema = server.freshSchema();
    const nodeA = await openArbiterStore(server.url(schema));
    const nodeB = await openArbiterStore(server.url(schema));
    try {
      const snapshotsB = new PolicySnapshots(nodeB, log);
      const before = await snapshotsB.current(60_000);
      await listening(nodeA, nodeB);
      await putData(nodeA, 'notify_probe', { at: 1 });
      const answered = Date.now();
      let seenAfter = Infinity;
      while (Date.now() - answered < 2000) {
        if ((await snapshotsB.current(60_000)).revision !== before.revision) {
          seenAfter = Date.now() - answered;
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      console.log(`      (B's kept snapshot replaced ${seenAfter} ms after A's write was answered)`);
      expect(seenAfter).to.be.below(100);
    } finally {
      await nodeA.close();
      await nodeB.close();
    }
  });

  it("keeps a client's record between requests on each node, ended by a write to it at once on the writer's node and within 100 ms on the other", async function () {
    if (!server.directory) this.skip(); // pg_stat_statements of the cluster of this run
    const schema = server.freshSchema();
    const nodeA = await openArbiterStore(server.url(schema));
    const nodeB = await openArbiterStore(server.url(schema));
    const clientReads = () =>
      Number(
        server.sql(
          `SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE 'SELECT doc FROM "c_clients"%'`,
        )[0]![0],
      );
    const enabledOn = async (node: Store) => (await findClientRecord(node, DEFAULT_TENANT, 'kept-client'))?.enabled;
    try {
      await listening(nodeA, nodeB);
      const record = { id: 'kept', clientId: 'kept-client', enabled: true } as unknown as ClientRecord;
      await clientsCollection(nodeA, DEFAULT_TENANT).insert(record);
      server.sql('SELECT pg_stat_statements_reset()');
      const started = Date.now();
      for (let request = 0; request < 100; request += 1) {
        await new Promise((resolve) => setImmediate(resolve)); // a later turn: no read of another is shared
        expect([await enabledOn(nodeA), await enabledOn(nodeB)]).to.deep.equal([true, true]);
      }
      // One read per node, and one more each time a kept record has served its 100 ms.
      expect(clientReads()).to.be.at.most(2 * (Math.ceil((Date.now() - started) / 100) + 1));
      await clientsCollection(nodeA, DEFAULT_TENANT).update('kept', { enabled: false });
      expect(await enabledOn(nodeA)).to.equal(false);
      const answered = Date.now();
      while ((await enabledOn(nodeB)) !== false && Date.now() - answered < 2000)
        await new Promise((resolve) => setTimeout(resolve, 2));
      const seenAfter = Date.now() - answered;
      console.log(`      (B's kept record ended ${seenAfter} ms after A's write was answered)`);
      expect(seenAfter).to.be.below(100);
    } finally {
      await nodeA.close();
      await nodeB.close();
    }
  });

  describe('a frozen PostgreSQL (SIGSTOP)', function () {
    let own: PostgresTestServer;

    before(async function () {
      this.timeout(120_000);
      own = await PostgresTestServer.start({ own: true });
    });

    after(async () => {
      await own?.stop();
    });

    it('fails reads and writes with StoreUnavailableError within 5 s, and serves again once it runs', async function () {
      this.timeout(30_000);
      const store = await openStore(own.url());
      const codes = store.collection('codes');
      await codes.insert({ id: 'kept' });
      // Every backend of the cluster: the postmaster's children included.
      const frozen = own.processes();
      for (const process_ of frozen) process.kill(process_, 'SIGSTOP');
      try {
        for (const operation of [() => codes.get('kept'), () => codes.insert({ id: 'new' }), () => store.ping()]) {
          const started = Date.now();
          const error = await operation().then(
            () => null,
            (rejection: unknown) => rejection,
          );
          expect(isStoreUnavailable(error), String(error)).to.equal(true);
          expect(Date.now() - started).to.be.below(5000);
        }
      } finally {
        for (const process_ of frozen) process.kill(process_, 'SIGCONT');
      }
      await eventuallyAnswers(store);
      expect(await codes.get('kept')).to.deep.equal({ id: 'kept' });
      await store.close();
    });
  });
});

/** Both stores hold their LISTEN connection: a write announced through A is heard by B's watcher. */
async function listening(a: Store, b: Store): Promise<void> {
  let heard = false;
  b.watch!(['notify_readiness'], () => (heard = true));
  a.watch!(['notify_readiness'], () => undefined);
  const deadline = Date.now() + 10_000;
  while (!heard && Date.now() < deadline) {
    await a.collection('notify_readiness').upsert({ id: 'probe' });
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(heard, 'B hears A').to.equal(true);
}

async function eventuallyAnswers(store: Store): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await store.ping();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
