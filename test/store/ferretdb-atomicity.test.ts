/**
 * Which of FerretDB's writes are atomic over PostgreSQL, found out rather than assumed: the same
 * races run against FerretDB itself (its socket, no proxy) and through the proxy of
 * test/support/ferretdb/proxy.go that the tests and bench:scale use.
 *
 * - A conditional findAndModify (a single-use code consumed by two callers), an $inc on one
 *   counter, and a delete by filter racing an update that makes the document stop matching: on
 *   FerretDB itself each shows the anomaly MongoDB never shows (both consumers win, increments are
 *   lost, a document just changed is deleted), because FerretDB 1.x runs them as a read followed
 *   by a write by _id. If one of these stops showing, FerretDB has become atomic for it and the
 *   proxy can stop serialising it: this test then fails and says so.
 * - Inserts of one _id: exactly one wins on FerretDB itself (PostgreSQL's unique index), so the
 *   proxy lets inserts pass concurrently.
 * - Through the proxy, none of the anomalies shows, round after round.
 */
import { expect } from 'chai';
import { MongoClient, MongoServerError, type Collection } from 'mongodb';
import { postgresqlInstalled, sharedMongoTestServer, type MongoTestServer } from './mongo-server.js';

/** Racers per round. */
const PARALLEL = 16;
/** Rounds tried to make an anomaly show on FerretDB itself (it usually does in the first). */
const ROUNDS_TO_SHOW = 40;
/** Rounds that must all come out right through the proxy. */
const ROUNDS_THROUGH_PROXY = 20;

interface Doc {
  _id: string;
  usedBy?: number | null;
  count?: number;
  state?: string;
}

/** One race: true when its outcome is one MongoDB's per-document atomicity rules out. */
type Race = (docs: Collection<Doc>, round: number) => Promise<boolean>;

/** Two or more of PARALLEL conditional findAndModify calls consume one code. */
const consumedTwice: Race = async (docs, round) => {
  const id = `code-${round}`;
  await docs.insertOne({ _id: id, usedBy: null });
  const wins = await Promise.all(
    Array.from({ length: PARALLEL }, (_, racer) =>
      docs.findOneAndUpdate({ _id: id, usedBy: null }, { $set: { usedBy: racer } }, { returnDocument: 'after' }),
    ),
  );
  return wins.filter((won) => won !== null).length !== 1;
};

/** PARALLEL increments of one counter leave it below PARALLEL. */
const lostIncrement: Race = async (docs, round) => {
  const id = `counter-${round}`;
  await docs.insertOne({ _id: id, count: 0 });
  await Promise.all(
    Array.from({ length: PARALLEL }, () =>
      docs.findOneAndUpdate({ _id: id }, { $inc: { count: 1 } }, { returnDocument: 'after' }),
    ),
  );
  return (await docs.findOne({ _id: id }))?.count !== PARALLEL;
};

/**
 * A delete of `state: old` documents and an update to `state: new` of the same document both say
 * they acted on it: atomically one of them comes first and the other finds nothing to do.
 */
const deletedAfterChange: Race = async (docs, round) => {
  const ids = Array.from({ length: PARALLEL }, (_, index) => `doc-${round}-${index}`);
  await docs.insertMany(ids.map((_id) => ({ _id, state: 'old' })));
  const [deleted, ...updated] = await Promise.all([
    docs.deleteMany({ _id: { $in: ids }, state: 'old' }),
    ...ids.map((_id) => docs.updateOne({ _id }, { $set: { state: 'new' } })),
  ]);
  const changed = updated.filter((result) => result.modifiedCount === 1).length;
  const remaining = await docs.countDocuments({ _id: { $in: ids } });
  // Each document was either deleted (and not changed) or changed (and not deleted).
  return deleted.deletedCount + changed !== PARALLEL || remaining !== changed;
};

/** Two or more of PARALLEL inserts of one _id succeed (none other than a duplicate-key error is expected). */
const insertedTwice: Race = async (docs, round) => {
  const results = await Promise.allSettled(
    Array.from({ length: PARALLEL }, (_, racer) => docs.insertOne({ _id: `insert-${round}`, usedBy: racer })),
  );
  for (const result of results)
    if (result.status === 'rejected' && !(result.reason instanceof MongoServerError && result.reason.code === 11000))
      throw result.reason;
  return results.filter((result) => result.status === 'fulfilled').length !== 1;
};

const NOT_ATOMIC_ON_FERRETDB: [string, Race][] = [
  ['findAndModify with a filter (a single-use code consumed twice)', consumedTwice],
  ['$inc on one document (increments lost)', lostIncrement],
  ['delete by filter against an update (a changed document deleted)', deletedAfterChange],
];

describe('FerretDB over PostgreSQL: which writes are atomic', function () {
  let server: MongoTestServer;
  const clients: MongoClient[] = [];

  before(async function () {
    if (process.env.MONGODB_URI || !postgresqlInstalled()) {
      console.warn('      (skipped: MONGODB_URI is set, or PostgreSQL is not installed: scripts/postgresql.sh bin)');
      this.skip();
    }
    this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
    server = await sharedMongoTestServer('postgresql');
  });

  after(async function () {
    await Promise.all(clients.map((client) => client.close()));
  });

  /** A fresh collection on FerretDB itself (`direct`) or through the proxy. */
  async function collection(direct: boolean): Promise<Collection<Doc>> {
    const database = server.freshDatabase();
    const client = await MongoClient.connect(direct ? server.directUri(database)! : server.uri(database));
    clients.push(client);
    return client.db().collection<Doc>('race');
  }

  /** The round in which the race first came out wrong, or null when it never did in `rounds`. */
  async function firstAnomaly(race: Race, docs: Collection<Doc>, rounds: number): Promise<number | null> {
    for (let round = 1; round <= rounds; round += 1) if (await race(docs, round)) return round;
    return null;
  }

  for (const [operation, race] of NOT_ATOMIC_ON_FERRETDB) {
    it(`${operation}: not atomic on FerretDB itself, atomic through the proxy`, async function () {
      this.timeout(120_000);
      const bare = await firstAnomaly(race, await collection(true), ROUNDS_TO_SHOW);
      expect(
        bare,
        `FerretDB applied ${operation} atomically ${ROUNDS_TO_SHOW} rounds in a row: the proxy may stop serialising it`,
      ).to.not.equal(null);
      expect(await firstAnomaly(race, await collection(false), ROUNDS_THROUGH_PROXY), 'through the proxy').to.equal(
        null,
      );
    });
  }

  it('serialises a write to one document only against the others on it, and a write by filter against its collection', async function () {
    this.timeout(60_000);
    const docs = await collection(false);
    const settled = async () => {
      // The proxy writes its totals every second: wait until two readings agree.
      let previous = JSON.stringify(server.proxyStats());
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        const now = JSON.stringify(server.proxyStats());
        if (now === previous) return server.proxyStats()!;
        previous = now;
      }
    };
    const before = await settled();
    await docs.insertMany(Array.from({ length: 5 }, (_, index) => ({ _id: `one-${index}`, count: 0 })));
    await Promise.all(
      Array.from({ length: 5 }, (_, index) => docs.findOneAndUpdate({ _id: `one-${index}` }, { $inc: { count: 1 } })),
    );
    await docs.updateOne({ _id: 'one-0' }, { $set: { state: 'x' } });
    // A purge of another collection holds that one while this one's writes go on.
    const other = (await collection(false)).db.collection<Doc>('elsewhere');
    await other.insertOne({ _id: 'held', state: 'x' });
    await Promise.all([
      other.deleteMany({ state: 'x' }),
      docs.findOneAndUpdate({ _id: 'one-1' }, { $inc: { count: 1 } }),
    ]);
    await docs.deleteMany({ state: 'x' });
    const after = await settled();
    const delta = (name: string) => (after.serialised[name] ?? 0) - (before.serialised[name] ?? 0);
    expect({ findandmodify: delta('findandmodify'), update: delta('update'), delete: delta('delete') }).to.deep.equal({
      findandmodify: 6,
      update: 1,
      delete: 2,
    });
    expect(after.exclusive - before.exclusive, 'only the deleteManys by filter lock a whole collection').to.equal(2);
    expect(delta('insert'), 'inserts pass unserialised').to.equal(0);
  });

  it('inserts of one _id: exactly one wins on FerretDB itself (so the proxy lets inserts pass)', async function () {
    this.timeout(120_000);
    expect(await firstAnomaly(insertedTwice, await collection(true), ROUNDS_THROUGH_PROXY)).to.equal(null);
  });
});
