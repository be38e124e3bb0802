import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { indexFields, physicalName } from '../../adapters/shared/spec.js';
import { knownCollections } from '../../src/collections.js';
import { describeStoreConformance } from './conformance.js';
import { MongoTestServer } from './mongo-server.js';

describe('MongoDB store', function () {
  const server = new MongoTestServer();

  before(async function () {
    this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
    await server.start();
    if (server.concurrencyGap) console.warn(`      (concurrency tests skipped: ${server.concurrencyGap})`);
  });

  after(async () => {
    await server.stop();
  });

  describeStoreConformance('mongodb', () => server.openStore(), {
    concurrencyUnsupported: () => server.concurrencyGap,
  });

  it('purgeExpired also covers collections this process has not declared', async () => {
    const database = server.freshDatabase();
    const writer = await server.openStore(database);
    const restarted = await server.openStore(database);
    try {
      await writer.collection('codes').insert({ id: 'a', expiresAt: Date.now() - 1000 });
      expect(await restarted.purgeExpired()).to.equal(1);
    } finally {
      await writer.close();
      await restarted.close();
    }
  });

  it('keys rows `<tenant>/<id>` in a new database: no U+0000, which FerretDB over PostgreSQL cannot store', async () => {
    const database = server.freshDatabase();
    const store = await server.openStore(database);
    const client = await MongoClient.connect(server.uri(database));
    try {
      const users = store.collection({ name: 'users', uniqueKeys: [['email']] });
      await users.insert({ id: 'u1', email: null });
      await store.collection('codes', 'acme').insert({ id: 'c/1' });
      const rows = client.db().collection<{ _id: string; _unique?: Record<string, string> }>(physicalName('users'));
      const row = await rows.findOne({});
      expect(row?._id).to.equal('_default/u1');
      expect(row?._unique?.email).to.equal('\u0001unset:_default/u1');
      expect((await client.db().collection(physicalName('codes')).findOne({}))?._id).to.equal('acme/c/1');
      expect(await store.collection('codes', 'acme').get('c/1')).to.deep.equal({ id: 'c/1' });
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('keeps reading and writing a database written before, whose rows are keyed with U+0000', async function () {
    if (server.backend === 'postgresql') this.skip(); // such a database cannot exist there
    const database = server.freshDatabase();
    const client = await MongoClient.connect(server.uri(database));
    try {
      const legacyRows = client.db().collection<{ _id: string; tenant: string; doc: object }>(physicalName('codes'));
      await legacyRows.insertOne({ _id: '_default\u0000old', tenant: '_default', doc: { id: 'old', v: 1 } });
      const store = await server.openStore(database);
      try {
        const codes = store.collection('codes');
        expect(await codes.get('old')).to.deep.equal({ id: 'old', v: 1 });
        await codes.insert({ id: 'new' });
        expect(await codes.update('old', { v: 2 })).to.deep.equal({ id: 'old', v: 2 });
        expect((await legacyRows.find({}).toArray()).map((row) => row._id).sort()).to.deep.equal([
          '_default\u0000new',
          '_default\u0000old',
        ]);
      } finally {
        await store.close();
      }
    } finally {
      await client.close();
    }
  });

  it('creates the indexes of every known collection, expiry and unique keys included, when it is opened', async () => {
    const database = server.freshDatabase();
    const store = await server.openStore(database);
    const client = await MongoClient.connect(server.uri(database));
    try {
      expect(knownCollections().some((spec) => spec.uniqueKeys?.length)).to.equal(true);
      for (const spec of knownCollections()) {
        const indexes = await client.db().collection(physicalName(spec.name)).listIndexes().toArray();
        const byName = new Map(indexes.map((index) => [index.name as string, index]));
        const where = `${spec.name}: ${JSON.stringify(indexes)}`;

        const ttl = byName.get('expiry_ttl');
        // The adapter's documented fallback: FerretDB 1.x rejects TTL indexes, so a plain index serves purgeExpired.
        const expiry = ttl ?? (server.ferretdbVersion ? byName.get('expiry') : undefined);
        expect(expiry, `expiry index of ${where}`).to.not.equal(undefined);
        expect(expiry!.key, where).to.deep.equal({ _expiresAtDate: 1 });
        if (ttl) expect(ttl.expireAfterSeconds, where).to.equal(0);
        else expect(expiry!.expireAfterSeconds, where).to.equal(undefined);

        for (const key of spec.uniqueKeys ?? []) {
          const unique = byName.get(`uq_${key.join('_')}`);
          expect(unique?.unique, `unique index on ${key.join(' + ')} of ${where}`).to.equal(true);
          expect(unique!.key, where).to.deep.equal({
            tenant: 1,
            ...Object.fromEntries(key.map((field) => [`_unique.${field}`, 1])),
          });
        }
        for (const fields of (spec.indexes ?? []).map(indexFields)) {
          expect(byName.get(`ix_${fields.join('_')}`)?.key, `index on ${fields.join(', ')} of ${where}`).to.deep.equal({
            tenant: 1,
            ...Object.fromEntries(fields.map((field) => [`doc.${field}`, 1])),
          });
        }
      }
    } finally {
      await client.close();
      await store.close();
    }
  });
});
