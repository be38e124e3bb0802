import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { openStore } from '../../src/store/open.js';
import { ConflictError, TurnReads, type Store, type StoredDoc } from '../../src/store/index.js';
import { describeStoreConformance } from './conformance.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { MIGRATIONS } from '../../src/migrations.js';
import { eventually } from '../support/oauth.js';
import { COLLECTIONS, storeSpecOf } from '../../src/catalog/index.js';

describeStoreConformance('sqlite in memory', () => openStore('sqlite::memory:'));

/** A directory of its own for the enclosing describe, removed after it. */
function scratchDirectory(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('SQLite store in a file', () => {
  const dir = scratchDirectory('arbiter-sqlite-');
  let files = 0;
  const freshFile = () => join(dir, `store-${++files}.db`);

  describeStoreConformance('sqlite file', () => openStore(`sqlite:${freshFile()}`));

  it('purgeExpired also covers collections this process has not declared', async () => {
    const file = freshFile();
    const writer = await openStore(`sqlite:${file}`);
    await writer.collection('codes').insert({ id: 'a', expiresAt: Date.now() - 1000 });
    await writer.close();
    const restarted = await openStore(`sqlite:${file}`);
    try {
      expect(await restarted.purgeExpired()).to.equal(1);
    } finally {
      await restarted.close();
    }
  });
});

describe('SQLite store: the file gives the space of purged records back', () => {
  const dir = scratchDirectory('arbiter-sqlite-vacuum-');
  const pragma = (file: string, name: string): number => {
    const reader = new Database(file, { readonly: true });
    try {
      return reader.pragma(name, { simple: true }) as number;
    } finally {
      reader.close();
    }
  };

  it('shrinks once expired records are purged (auto_vacuum=incremental)', async () => {
    const file = join(dir, 'shrinks.db');
    const store = await openStore(`sqlite:${file}`);
    try {
      const codes = store.collection('codes');
      const padding = 'x'.repeat(1_000);
      for (let from = 0; from < 5_000; from += 1_000)
        await codes.insertMany(
          Array.from({ length: 1_000 }, (_, index) => ({ id: `e${from + index}`, padding, expiresAt: Date.now() - 1 })),
        );
      const grown = pragma(file, 'page_count');
      expect(await store.purgeExpired()).to.equal(5_000);
      expect(pragma(file, 'auto_vacuum')).to.equal(2);
      expect(pragma(file, 'page_count')).to.be.below(grown / 4);
      expect(pragma(file, 'freelist_count')).to.equal(0);
    } finally {
      await store.close();
    }
  });

  it('converts a file made by an older release (auto_vacuum=none) once, through schema migration 3, keeping its records', async () => {
    const file = join(dir, 'older.db');
    const store = await openStore(`sqlite:${file}`);
    await store.collection('codes').insert({ id: 'kept' });
    await store.close();
    // As an older release left it: no auto_vacuum.
    const older = new Database(file);
    older.pragma('auto_vacuum = NONE');
    older.exec('VACUUM');
    older.close();
    expect(pragma(file, 'auto_vacuum')).to.equal(0);
    const reopened = await openStore(`sqlite:${file}`);
    try {
      const step = MIGRATIONS.find((migration) => migration.to === 3)!;
      await step.run(reopened);
      expect(pragma(file, 'auto_vacuum')).to.equal(2);
      expect(await reopened.collection('codes').get('kept')).to.deep.equal({ id: 'kept' });
      await step.run(reopened);
    } finally {
      await reopened.close();
    }
  });
});

describe('SQLite store: writes of one turn share one transaction (group commit)', () => {
  const dir = scratchDirectory('arbiter-sqlite-group-');

  it('fails only the conflicting write, all of its rows and none of the others, and acknowledges each once committed', async () => {
    const file = join(dir, 'group.db');
    const store = await openStore(`sqlite:${file}`);
    const things = store.collection({ name: 'things', uniqueKeys: [['name']] });
    await things.insert({ id: 'taken', name: 'taken' });
    // Issued in one turn: one group transaction.
    const outcomes = await Promise.allSettled([
      things.insert({ id: 'a', name: 'a' }),
      things.insertMany([
        { id: 'b1', name: 'b1' },
        { id: 'b2', name: 'taken' },
      ]),
      things.upsert({ id: 'c', name: 'c' }),
      things.insert({ id: 'taken', name: 'again' }),
      store.collection('others').insert({ id: 'd' }),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).to.deep.equal([
      'fulfilled',
      'rejected',
      'fulfilled',
      'rejected',
      'fulfilled',
    ]);
    expect((outcomes[1] as PromiseRejectedResult).reason).to.be.instanceOf(ConflictError);
    expect(await things.get('b1'), 'the rest of a failed insertMany is rolled back with it').to.equal(null);
    await store.close();
    // What was acknowledged is in the file: a new process sees it.
    const reopened = await openStore(`sqlite:${file}`);
    try {
      const stored = await reopened.collection({ name: 'things', uniqueKeys: [['name']] }).find({});
      expect(stored.map((doc) => doc.id).sort()).to.deep.equal(['a', 'c', 'taken']);
      expect(await reopened.collection('others').get('d')).to.deep.equal({ id: 'd' });
    } finally {
      await reopened.close();
    }
  });
});

describe('SQLite store: checkpoints off the event loop', () => {
  const dir = scratchDirectory('arbiter-sqlite-checkpoint-');

  it('copies committed pages from the WAL into the database file from a thread of its own, long before the writer would', async () => {
    const file = join(dir, 'checkpointed.db');
    const store = await openStore(`sqlite:${file}`);
    try {
      const pages = store.collection('pages');
      const filler = 'x'.repeat(4000);
      // About 400 pages (1.6 MB) in the WAL: far under the writer's own threshold (10,000 pages).
      for (let turn = 0; turn < 20; turn++)
        await Promise.all(Array.from({ length: 20 }, (_, index) => pages.insert({ id: `p${turn}-${index}`, filler })));
      await eventually(async () => statSync(file).size > 1_500_000, 10_000);
      const copy = new Database(file, { readonly: true });
      try {
        expect((copy.prepare('SELECT COUNT(*) AS n FROM c_pages').get() as { n: number }).n).to.equal(400);
      } finally {
        copy.close();
      }
    } finally {
      await store.close();
    }
  });
});

describe('SQLite store: writers in several processes (WORKERS)', () => {
  const dir = scratchDirectory('arbiter-sqlite-lock-');

  it("waits for another connection's write lock without stopping the event loop, then writes", async () => {
    const file = join(dir, 'locked.db');
    const store = await openStore(`sqlite:${file}`);
    // Another process's connection, holding the file's write lock (a long transaction of another worker).
    const other = new Database(file);
    try {
      const tokens = store.collection('tokens');
      await tokens.insert({ id: 'before' });
      other.exec('BEGIN IMMEDIATE');
      let ticks = 0;
      const ticking = setInterval(() => (ticks += 1), 5);
      const [inserted, updated, sequence] = [
        tokens.insert({ id: 'during' }),
        tokens.update('before', { seen: true }, { seen: null }),
        store.nextSequence('locked'),
      ];
      let settled = false;
      void Promise.allSettled([inserted, updated, sequence]).then(() => (settled = true));
      // The timer keeps ticking while the writes wait: a busy handler sleeping in SQLite would have
      // held this process still until its timeout, and the writes would have failed by then.
      await eventually(() => ticks > 10, 5_000, 5);
      expect(settled, 'the writes still wait for the lock').to.equal(false);
      other.exec('COMMIT');
      await Promise.all([inserted, updated, sequence]);
      clearInterval(ticking);
      expect(await tokens.get('during')).to.include({ id: 'during' });
      expect(await tokens.get('before')).to.include({ seen: true });
    } finally {
      other.close();
      await store.close();
    }
  });
});

describe('SQLite store: reads kept while a collection is unchanged see the writes of other processes', () => {
  const dir = scratchDirectory('arbiter-sqlite-changes-');

  it('ends a kept read with a write another process committed, before any turn ends, and keeps it through writes elsewhere', async () => {
    const file = join(dir, 'changes.db');
    const [here, there] = [await openStore(`sqlite:${file}`), await openStore(`sqlite:${file}`)];
    try {
      const reads = new TurnReads<StoredDoc | null>({ collections: ['clients'] });
      let loads = 0;
      const client = () => reads.read(here, 'c1', async () => (loads++, here.collection('clients', 't').get('c1')));
      await there.collection('clients', 't').insert({ id: 'c1', enabled: true });
      expect(await client()).to.include({ enabled: true });
      // Another process's writes to other collections (its tokens) leave the read kept.
      await there.collection('tokens', 't').insert({ id: 'k1' });
      await new Promise((resolve) => setImmediate(resolve));
      await client();
      expect(loads, 'kept').to.equal(1);
      // In the same turn as the other process's answer: the read is not kept past it.
      await there.collection('clients', 't').update('c1', { enabled: false });
      expect(await client(), 'read again at once').to.include({ enabled: false });
      expect(loads).to.equal(2);
    } finally {
      await here.close();
      await there.close();
    }
  });
});

describe('SQLite store: reads kept while a collection is unchanged are bounded in bytes', () => {
  const dir = scratchDirectory('arbiter-sqlite-held-');

  // Found 2026-11-29: lists of large delegations, held by the thousand, kept 2.8 MB each.
  it('holds no read heavier than a sixteenth of the budget, and lets the oldest go beyond the budget', async () => {
    const store = await openStore(`sqlite:${join(dir, 'held.db')}`);
    try {
      const reads = new TurnReads<string>({
        collections: ['lists'],
        weigh: (value: string) => value.length,
        maxHeldBytes: 1600,
      });
      const loads = new Map<string, number>();
      const read = (key: string, bytes: number) =>
        reads.read(store, key, async () => (loads.set(key, (loads.get(key) ?? 0) + 1), 'x'.repeat(bytes)));
      const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
      await store.collection('lists', 't').insert({ id: 'l1' });
      for (const key of ['small', 'heavy']) await read(key, key === 'small' ? 50 : 101);
      await nextTurn();
      for (const key of ['small', 'heavy']) await read(key, key === 'small' ? 50 : 101);
      expect(Object.fromEntries(loads), 'the heavy one read again').to.deep.equal({ small: 1, heavy: 2 });
      for (let index = 0; index < 32; index++) await read(`k${index}`, 50);
      await nextTurn();
      await read('small', 50);
      await read('k31', 50);
      expect([loads.get('small'), loads.get('k31')], 'the oldest let go, the newest kept').to.deep.equal([2, 1]);
    } finally {
      await store.close();
    }
  });
});

describe('SQLite store: a read of documents the store expires by itself is held until they expire', () => {
  const dir = scratchDirectory('arbiter-sqlite-expiring-');

  // Found 2026-11-29: such a read was never held, so a delegation list with one time-limited delegation was read at every decision.
  it('serves the held read until its first document expires, then reads again', async () => {
    const store = await openStore(`sqlite:${join(dir, 'expiring.db')}`);
    try {
      const reads = new TurnReads<StoredDoc[]>({ collections: ['grants'] });
      const grants = store.collection('grants', 't');
      let loads = 0;
      const read = () => reads.read(store, 'k', async () => (loads++, grants.find()));
      const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
      await grants.insert({ id: 'open' });
      await grants.insert({ id: 'soon', expiresAt: Date.now() + 400 });
      await read();
      await nextTurn();
      expect((await read()).map((doc) => doc.id)).to.deep.equal(['open', 'soon']);
      expect(loads, 'held while unexpired').to.equal(1);
      await eventually(async () => (await nextTurn(), (await read()).length === 1), 5_000);
      expect(loads, 'read again once it expired').to.be.above(1);
    } finally {
      await store.close();
    }
  });
});

describe('SQLite store: sparse indexes hold only the rows that have the field', () => {
  const dir = scratchDirectory('arbiter-sqlite-sparse-');
  const indexesOf = (file: string, table: string) => {
    const reader = new Database(file, { readonly: true });
    try {
      return reader
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL")
        .all(table) as { name: string; sql: string }[];
    } finally {
      reader.close();
    }
  };

  it('makes them partial, drops the full index an earlier release made, and still finds by value and by absence', async () => {
    const file = join(dir, 'sparse.db');
    // An earlier release: the same collection with a full index on grantId.
    const older = await openStore(`sqlite:${file}`);
    await older.collection({ name: 'artefacts', indexes: ['grantId'] }).insert({ id: 'old', grantId: 'g1' });
    await older.close();
    expect(indexesOf(file, 'c_artefacts').map((index) => index.name)).to.include('c_artefacts_ix_grantId');

    const store = await openStore(`sqlite:${file}`);
    try {
      const artefacts = store.collection({ name: 'artefacts', indexes: ['grantId'], sparseIndexes: true });
      await artefacts.insert({ id: 'machine' });
      const indexes = indexesOf(file, 'c_artefacts');
      expect(indexes.map((index) => index.name)).not.to.include('c_artefacts_ix_grantId');
      const sparse = indexes.find((index) => index.name === 'c_artefacts_sx_grantId');
      expect(sparse?.sql).to.contain("WHERE json_extract(doc, '$.grantId') IS NOT NULL");
      expect((await artefacts.find({ grantId: 'g1' })).map((doc) => doc.id)).to.deep.equal(['old']);
      expect((await artefacts.find({ grantId: null })).map((doc) => doc.id)).to.deep.equal(['machine']);
    } finally {
      await store.close();
    }
  });
});

/**
 * How SQLite reads what `read` asks of `store` (EXPLAIN QUERY PLAN of its SELECT, with `params`
 * bound as the store binds them: tenant, now, the filter's f0, f1…, startAt): its steps, joined.
 */
async function queryPlanOf(
  store: Store,
  read: () => Promise<unknown>,
  params: Record<string, unknown>,
): Promise<string> {
  const internals = store as unknown as { db: Database.Database; statements: { get(sql: string): unknown } };
  const seen: string[] = [];
  const get = internals.statements.get.bind(internals.statements);
  internals.statements.get = (sql: string) => {
    seen.push(sql);
    return get(sql);
  };
  try {
    await read();
  } finally {
    internals.statements.get = get;
  }
  const query = seen.find((sql) => sql.startsWith('SELECT doc FROM'))!;
  const plan = internals.db.prepare(`EXPLAIN QUERY PLAN ${query}`).all({ now: Date.now(), ...params });
  return (plan as { detail: string }[]).map((step) => step.detail).join('; ');
}

describe('SQLite store: the Admin API lists of the catalog collections', () => {
  // A list page goes by ascending id: sorted in full at every page, a collection of 300,000
  // subjects held SQLite's thread 134 ms for 20 of them (6 ms from the index).
  it('reads a page by ascending id from an index, not by sorting the collection', async () => {
    const store = await openStore('sqlite::memory:');
    try {
      for (const definition of COLLECTIONS) {
        const records = store.collection(storeSpecOf(definition), 'lists');
        await records.insert({ id: 1 });
        const plan = await queryPlanOf(
          store,
          () => records.find({}, { sort: { field: 'id', direction: 'asc' }, skip: 0, limit: 21 }),
          { tenant: 'lists' },
        );
        expect(plan, definition.path).not.to.contain('TEMP B-TREE');
      }
    } finally {
      await store.close();
    }
  });
});

describe('SQLite store: the records of one referenced record, a page at a time', () => {
  // Found 2026-11-29: an identity provider's users, read by ascending id, were found by walking
  // the id index over every subject of the tenant.
  it('reads a page of the subjects of one identity provider by ascending id from an index of both', async () => {
    const store = await openStore('sqlite::memory:');
    try {
      const subjects = store.collection(storeSpecOf(COLLECTIONS.find((c) => c.path === 'subjects')!), 'refs');
      await subjects.insert({ id: 1, subjectId: 'a', identityProviderId: 7 });
      const plan = await queryPlanOf(
        store,
        () =>
          subjects.find({ identityProviderId: 7 }, { sort: { field: 'id', direction: 'asc' }, startAt: 1, limit: 100 }),
        { tenant: 'refs', f0: 7, startAt: 1 },
      );
      expect(plan).to.match(/USING INDEX \S*identityProviderId_id/);
      expect(plan).not.to.contain('TEMP B-TREE');
    } finally {
      await store.close();
    }
  });
});

describe('SQLite store: the audit log filtered as the console filters it', () => {
  // Found 2026-11-29: filtered by outcome (or impact analysis by client), a page that matched
  // little read the whole tenant's log on the event loop: 1 s at 1,000,000 entries.
  it("reads a page of one outcome, and a client's decisions by time, from an index of those fields", async () => {
    const store = await openStore('sqlite::memory:');
    try {
      const log = store.collection(AUDIT_LOG_COLLECTION, 'audit');
      await log.insert({
        id: 1,
        tenantId: 't',
        outcome: 'error',
        clientId: 'c',
        createdAt: '2026-11-29T00:00:00.000Z',
      });
      const byOutcome = await queryPlanOf(
        store,
        () => log.find({ tenantId: 't', outcome: 'error' }, { sort: { field: 'id', direction: 'desc' }, limit: 21 }),
        { tenant: 'audit', f0: 't', f1: 'error' },
      );
      expect(byOutcome)
        .to.match(/USING INDEX \S*outcome/)
        .and.not.to.contain('TEMP B-TREE');
      const byClient = await queryPlanOf(
        store,
        () =>
          log.find({ tenantId: 't', clientId: 'c' }, { sort: { field: 'createdAt', direction: 'desc' }, limit: 250 }),
        { tenant: 'audit', f0: 't', f1: 'c' },
      );
      expect(byClient)
        .to.match(/USING INDEX \S*clientId_createdAt/)
        .and.not.to.contain('TEMP B-TREE');
    } finally {
      await store.close();
    }
  });
});

describe('SQLite store: the lookups of a request path in the catalog collections', () => {
  // Found 2026-11-29: a `resource` that names no resource server was looked up among the tenant's
  // resources by a scan of them all: 185 ms of every such /token at 100,000 resources.
  it('finds a record by each lookup field (a resource by its identifier) from an index of that field', async () => {
    const store = await openStore('sqlite::memory:');
    try {
      const lookups = COLLECTIONS.flatMap((definition) =>
        (definition.lookupFields ?? []).map((field) => ({ definition, field })),
      );
      expect(lookups.map(({ definition, field }) => `${definition.path}.${field}`)).to.include(
        'resources.resourceIdentifier',
      );
      for (const { definition, field } of lookups) {
        const records = store.collection(storeSpecOf(definition), 'lookups');
        const value = 'https://api.example.test/a';
        await records.insert({ id: 1, [field]: value });
        const plan = await queryPlanOf(store, () => records.findOne({ [field]: value }), {
          tenant: 'lookups',
          f0: value,
        });
        expect(plan, `${definition.path}.${field}`).to.match(new RegExp(`USING INDEX \\S*${field}`));
      }
    } finally {
      await store.close();
    }
  });
});
