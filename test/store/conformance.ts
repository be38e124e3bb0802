/**
 * The behaviour every Store implementation must show (see src/store/types.ts).
 * Each adapter's test file calls describeStoreConformance with a way to open a
 * fresh, empty store of its kind; every test gets its own store.
 */
import { expect } from 'chai';
import { asRequestBegunNow } from '../../src/http/request-start.js';
import { TurnReads } from '../../src/store/turn-reads.js';
import {
  ConflictError,
  DEFAULT_TENANT,
  type CollectionSpec,
  type Store,
  type StoredDoc,
} from '../../src/store/types.js';

export interface ConformanceOptions {
  /**
   * Why the server behind this store cannot pass the concurrency tests (parallel
   * conditional updates, parallel nextSequence), or undefined when it can. Asked
   * when each such test runs, so after the caller's `before` hooks.
   */
  concurrencyUnsupported?: () => string | undefined;
}

const USERS: CollectionSpec = { name: 'users', uniqueKeys: [['email'], ['provider', 'subject']], indexes: ['status'] };
const CODES: CollectionSpec = { name: 'codes', indexes: ['grantId'] };
const PARALLEL = 20;

const past = () => Date.now() - 60_000;
const future = () => Date.now() + 3_600_000;

/** Resolves once the clock has passed `instant` (epoch ms): a window's end is a time, not a state to poll. */
async function untilPast(instant: number): Promise<void> {
  while (Date.now() <= instant)
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, instant - Date.now() + 1)));
}

async function expectConflict(write: Promise<unknown>, fields: string[]): Promise<void> {
  const error = await write.then(
    () => undefined,
    (rejection: unknown) => rejection,
  );
  expect(error, 'expected a ConflictError').to.be.instanceOf(ConflictError);
  expect((error as InstanceType<typeof ConflictError>).fields).to.deep.equal(fields);
}

export function describeStoreConformance(
  name: string,
  open: () => Promise<Store>,
  options: ConformanceOptions = {},
): void {
  describe(`Store conformance: ${name}`, () => {
    let store: Store;

    beforeEach(async () => {
      store = await open();
    });

    afterEach(async () => {
      await store?.close();
    });

    /** A test that needs a server whose conditional writes are atomic. */
    function itConcurrently(title: string, body: () => Promise<void>): void {
      it(title, async function () {
        if (options.concurrencyUnsupported?.()) this.skip();
        await body();
      });
    }

    describe('insert and get', () => {
      it('returns the document unchanged, nested values, booleans and nulls included', async () => {
        const doc = {
          id: 'a',
          name: 'x',
          n: 3.5,
          flag: false,
          nothing: null,
          tags: ['t1', 't2'],
          nested: { deep: { v: 1 } },
        };
        const codes = store.collection(CODES);
        expect(await codes.insert(doc)).to.deep.equal(doc);
        expect(await codes.get('a')).to.deep.equal(doc);
      });

      it('returns null for an unknown id', async () => {
        expect(await store.collection(CODES).get('missing')).to.equal(null);
      });

      it('gets several ids in one read: the live ones found, unknown and expired ones left out', async () => {
        const codes = store.collection(CODES);
        await codes.insertMany([
          { id: 'm1', v: 1 },
          { id: 7, v: 2 },
          { id: 'm-old', v: 3, expiresAt: past() },
          { id: 'm-live', v: 4, expiresAt: future() },
        ]);
        await store.collection(CODES, 'other-tenant').insert({ id: 'm-elsewhere', v: 5 });
        const found = await codes.getMany(['m1', 7, 'm-old', 'm-live', 'm-elsewhere', 'missing']);
        expect(found.map((doc) => doc.v).sort()).to.deep.equal([1, 2, 4]);
        expect(found.find((doc) => doc.v === 2)?.id, 'a numeric id stays numeric').to.equal(7);
        expect(await codes.getMany([])).to.deep.equal([]);
      });

      it('keeps numeric ids numeric', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 42, label: 'answer' });
        const found = await codes.get(42);
        expect(found?.id).to.equal(42);
        expect((await codes.find({ label: 'answer' }))[0]?.id).to.equal(42);
      });

      it('rejects a duplicate id with a ConflictError on [id] and keeps the original', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', v: 1 });
        await expectConflict(codes.insert({ id: 'a', v: 2 }), ['id']);
        expect(await codes.get('a')).to.deep.equal({ id: 'a', v: 1 });
      });

      it('lets exactly one of several parallel inserts of the same id succeed', async () => {
        const codes = store.collection(CODES);
        const results = await Promise.allSettled(
          Array.from({ length: PARALLEL }, (_, v) => codes.insert({ id: 'a', v })),
        );
        expect(results.filter((result) => result.status === 'fulfilled')).to.have.length(1);
        for (const result of results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')) {
          expect(result.reason).to.be.instanceOf(ConflictError);
        }
        expect(await codes.count()).to.equal(1);
      });
    });

    describe('insertMany', () => {
      const many = (count: number, from = 1) =>
        Array.from({ length: count }, (_, index) => ({
          id: from + index,
          grantId: `g${(from + index) % 3}`,
          nested: { n: from + index },
        }));

      it('stores every document, numeric ids and nested values as given, and returns them in order', async () => {
        const codes = store.collection(CODES);
        const docs = many(250);
        expect(await codes.insertMany(docs)).to.deep.equal(docs);
        expect(await codes.count()).to.equal(250);
        expect(await codes.get(137)).to.deep.equal(docs[136]);
        expect((await codes.find({}, { sort: { field: 'id', direction: 'asc' } })).map((doc) => doc.id)).to.deep.equal(
          docs.map((doc) => doc.id),
        );
        expect(await codes.count({ grantId: 'g0' })).to.equal(83);
      });

      it('stores nothing for an empty list', async () => {
        const codes = store.collection(CODES);
        expect(await codes.insertMany([])).to.deep.equal([]);
        expect(await codes.count()).to.equal(0);
      });

      it('rejects an id already stored with a ConflictError on [id], keeps the original and stores none after it', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 3, v: 'original' });
        await expectConflict(codes.insertMany([{ id: 1 }, { id: 2 }, { id: 3, v: 'clash' }, { id: 4 }, { id: 5 }]), [
          'id',
        ]);
        expect(await codes.get(3)).to.deep.equal({ id: 3, v: 'original' });
        expect(await codes.get(4)).to.equal(null);
        expect(await codes.get(5)).to.equal(null);
      });

      it('rejects the same id twice in one call, storing the first at most', async () => {
        const codes = store.collection(CODES);
        await expectConflict(codes.insertMany([{ id: 'a', v: 1 }, { id: 'a', v: 2 }, { id: 'b' }]), ['id']);
        expect(await codes.find()).to.satisfy(
          (found: StoredDoc[]) => found.length === 0 || (found.length === 1 && found[0]!.v === 1),
        );
        expect(await codes.get('b')).to.equal(null);
      });

      it('enforces unique keys against stored documents and between the new ones', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', email: 'a@example.com' });
        await expectConflict(users.insertMany([{ id: 'u2', email: 'a@example.com' }]), ['email']);
        await expectConflict(
          users.insertMany([
            { id: 'u3', provider: 'google', subject: 's1' },
            { id: 'u4', provider: 'google', subject: 's1' },
          ]),
          ['provider', 'subject'],
        );
        expect(await users.get('u2')).to.equal(null);
        expect(await users.get('u4')).to.equal(null);
        await users.insertMany([{ id: 'u5', email: null }, { id: 'u6', email: null }, { id: 'u7' }]);
        for (const id of ['u5', 'u6', 'u7']) expect(await users.get(id), id).to.not.equal(null);
      });

      it('reuses the ids of expired documents, and hides documents that expire', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', v: 1, expiresAt: past() });
        // A fresh document before the reused id: a retry after the clash must not send it twice.
        await codes.insertMany([
          { id: 'z' },
          { id: 'a', v: 2 },
          { id: 'b', expiresAt: past() },
          { id: 'c', expiresAt: future() },
        ]);
        expect(await codes.get('a')).to.deep.equal({ id: 'a', v: 2 });
        expect(await codes.get('b')).to.equal(null);
        expect(await codes.count()).to.equal(3);
      });

      it('confines the documents to its tenant', async () => {
        await store.collection(CODES, 'acme').insertMany([{ id: 'x' }, { id: 'y' }]);
        expect(await store.collection(CODES, 'globex').count()).to.equal(0);
        await store.collection(CODES, 'globex').insertMany([{ id: 'x' }]);
        expect(await store.collection(CODES, 'acme').count()).to.equal(2);
      });
    });

    describe('unique keys', () => {
      it('rejects a duplicate single-field key within a tenant', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', email: 'a@example.com' });
        await expectConflict(users.insert({ id: 'u2', email: 'a@example.com' }), ['email']);
        expect(await users.get('u2')).to.equal(null);
      });

      it('rejects a duplicate compound key but allows a partial overlap', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', provider: 'google', subject: 's1' });
        await users.insert({ id: 'u2', provider: 'google', subject: 's2' });
        await users.insert({ id: 'u3', provider: 'github', subject: 's1' });
        await expectConflict(users.insert({ id: 'u4', provider: 'google', subject: 's1' }), ['provider', 'subject']);
      });

      it('allows the same values in another tenant', async () => {
        await store
          .collection(USERS, 'acme')
          .insert({ id: 'u1', email: 'a@example.com', provider: 'google', subject: 's1' });
        await store
          .collection(USERS, 'globex')
          .insert({ id: 'u2', email: 'a@example.com', provider: 'google', subject: 's1' });
        expect(await store.collection(USERS, 'globex').count({ email: 'a@example.com' })).to.equal(1);
      });

      it('never lets null or absent values clash', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', email: null, provider: 'google', subject: null });
        await users.insert({ id: 'u2', email: null, provider: 'google', subject: null });
        await users.insert({ id: 'u3' });
        await users.insert({ id: 'u4', provider: 'google' });
        expect(await users.count()).to.equal(4);
      });

      it('rejects an update that would clash and leaves the document unchanged', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', email: 'a@example.com' });
        await users.insert({ id: 'u2', email: 'b@example.com' });
        await expectConflict(users.update('u2', { email: 'a@example.com' }), ['email']);
        expect(await users.get('u2')).to.deep.equal({ id: 'u2', email: 'b@example.com' });
      });

      it('rejects an update completing a compound key that another document holds', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', provider: 'google', subject: 's1' });
        await users.insert({ id: 'u2', provider: 'google' });
        await expectConflict(users.update('u2', { subject: 's1' }), ['provider', 'subject']);
      });

      it("does not count a document's own values as a clash", async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', email: 'a@example.com', provider: 'google', subject: 's1' });
        expect(await users.update('u1', { email: 'a@example.com', name: 'Ann' })).to.include({ name: 'Ann' });
        await users.upsert({ id: 'u1', email: 'a@example.com', provider: 'google', subject: 's1', name: 'Anna' });
        expect(await users.get('u1')).to.include({ name: 'Anna' });
      });

      it('rejects an upsert clashing with another document', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', email: 'a@example.com' });
        await users.insert({ id: 'u2', email: 'b@example.com' });
        await expectConflict(users.upsert({ id: 'u2', email: 'a@example.com' }), ['email']);
        await expectConflict(users.upsert({ id: 'u3', email: 'a@example.com' }), ['email']);
        expect(await users.get('u2')).to.deep.equal({ id: 'u2', email: 'b@example.com' });
      });

      it('frees the values of an expired document', async () => {
        const users = store.collection(USERS);
        await users.insert({ id: 'u1', email: 'a@example.com', expiresAt: past() });
        await users.insert({ id: 'u2', email: 'a@example.com' });
        expect(await users.find({ email: 'a@example.com' })).to.deep.equal([{ id: 'u2', email: 'a@example.com' }]);
      });

      it('enforces unique keys declared after the collection was first used by name', async () => {
        await store.collection('users').insert({ id: 'u1', email: 'a@example.com' });
        await store.collection('users').insert({ id: 'u2', email: null });
        await store.collection('users').insert({ id: 'u3' });
        const users = store.collection(USERS);
        await expectConflict(users.insert({ id: 'u4', email: 'a@example.com' }), ['email']);
        await users.insert({ id: 'u5' });
        await expectConflict(store.collection('users').insert({ id: 'u6', email: 'a@example.com' }), ['email']);
      });
    });

    describe('tenants', () => {
      it('reports its tenant, the default one when none is named', () => {
        expect(store.collection(CODES).tenant).to.equal(DEFAULT_TENANT);
        expect(store.collection(CODES, 'acme').tenant).to.equal('acme');
      });

      it('keeps the documents of one tenant out of every read of another', async () => {
        await store.collection(CODES, 'acme').insert({ id: 'a', kind: 'x' });
        const globex = store.collection(CODES, 'globex');
        expect(await globex.get('a')).to.equal(null);
        expect(await globex.findOne({ kind: 'x' })).to.equal(null);
        expect(await globex.find()).to.deep.equal([]);
        expect(await globex.count()).to.equal(0);
        expect(await store.collection(CODES).count()).to.equal(0);
      });

      it('allows the same id in two tenants, independently', async () => {
        await store.collection(CODES, 'acme').insert({ id: 'a', owner: 'acme' });
        await store.collection(CODES, 'globex').insert({ id: 'a', owner: 'globex' });
        expect(await store.collection(CODES, 'acme').get('a')).to.deep.equal({ id: 'a', owner: 'acme' });
        expect(await store.collection(CODES, 'globex').get('a')).to.deep.equal({ id: 'a', owner: 'globex' });
      });

      it('confines update, upsert, delete and deleteMany to their tenant', async () => {
        const acme = store.collection(CODES, 'acme');
        const globex = store.collection(CODES, 'globex');
        await acme.insert({ id: 'a', kind: 'x' });
        await acme.insert({ id: 'b', kind: 'x' });
        expect(await globex.update('a', { kind: 'changed' })).to.equal(null);
        expect(await globex.delete('a')).to.equal(false);
        expect(await globex.deleteMany({ kind: 'x' })).to.equal(0);
        await globex.upsert({ id: 'b', kind: 'globex' });
        expect(await acme.find({}, { sort: { field: 'id', direction: 'asc' } })).to.deep.equal([
          { id: 'a', kind: 'x' },
          { id: 'b', kind: 'x' },
        ]);
        expect(await globex.find()).to.deep.equal([{ id: 'b', kind: 'globex' }]);
      });
    });

    describe('upsert', () => {
      it('inserts a document that does not exist', async () => {
        const codes = store.collection(CODES);
        expect(await codes.upsert({ id: 'a', v: 1 })).to.deep.equal({ id: 'a', v: 1 });
        expect(await codes.get('a')).to.deep.equal({ id: 'a', v: 1 });
      });

      it('replaces the whole document, dropping fields the new one lacks', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', v: 1, extra: 'gone soon' });
        await codes.upsert({ id: 'a', v: 2 });
        expect(await codes.get('a')).to.deep.equal({ id: 'a', v: 2 });
        expect(await codes.count()).to.equal(1);
      });
    });

    describe('find, findOne and count', () => {
      const ITEMS = [
        { id: 1, kind: 'a', n: 10, active: true, note: null },
        { id: 2, kind: 'b', n: 20, active: false },
        { id: 3, kind: 'a', n: 30, active: false, note: 'x' },
        { id: 4, kind: 'b', n: 10, active: true, note: 'y' },
      ];

      beforeEach(async () => {
        const items = store.collection('items');
        for (const item of ITEMS) await items.insert(item);
      });

      const ids = (docs: StoredDoc[]) => docs.map((doc) => doc.id).sort();

      it('returns every document without a filter', async () => {
        expect(ids(await store.collection('items').find())).to.deep.equal([1, 2, 3, 4]);
      });

      it('refuses a filter value that is not a string, number, boolean or null, reading, deleting and changing nothing (no MongoDB operator slips in)', async () => {
        const items = store.collection('items');
        for (const value of [{ $ne: null }, { $gt: '' }, ['a', 'b']] as unknown as string[]) {
          const calls = [
            () => items.find({ kind: value }),
            () => items.findOne({ kind: value }),
            () => items.count({ kind: value }),
            () => items.deleteMany({ kind: value }),
            () => items.update(1, { note: 'changed' }, { kind: value }),
          ];
          for (const call of calls) {
            const error = await call().then(
              () => null,
              (thrown: unknown) => thrown,
            );
            expect(error, `${JSON.stringify(value)}: ${String(error)}`).to.be.instanceOf(TypeError);
            expect((error as Error).message).to.match(/compares kind with a string, a number, a boolean or null/);
          }
        }
        expect(ids(await items.find())).to.deep.equal([1, 2, 3, 4]);
        expect((await items.get(1))?.note).to.equal(null);
      });

      it('filters on strings, numbers and both booleans', async () => {
        const items = store.collection('items');
        expect(ids(await items.find({ kind: 'a' }))).to.deep.equal([1, 3]);
        expect(ids(await items.find({ n: 10 }))).to.deep.equal([1, 4]);
        expect(ids(await items.find({ active: true }))).to.deep.equal([1, 4]);
        expect(ids(await items.find({ active: false }))).to.deep.equal([2, 3]);
        expect(ids(await items.find({ id: 2 }))).to.deep.equal([2]);
      });

      it('matches null against absent and null values', async () => {
        expect(ids(await store.collection('items').find({ note: null }))).to.deep.equal([1, 2]);
      });

      it('requires every field of the filter to match', async () => {
        expect(ids(await store.collection('items').find({ kind: 'b', n: 10, active: true }))).to.deep.equal([4]);
        expect(await store.collection('items').find({ kind: 'a', n: 20 })).to.deep.equal([]);
      });

      it('does not match booleans against numbers', async () => {
        const flags = store.collection('flags');
        await flags.insert({ id: 'f', flag: true, one: 1 });
        expect(await flags.find({ flag: 1 })).to.deep.equal([]);
        expect(await flags.find({ one: true })).to.deep.equal([]);
        expect(await flags.count({ flag: true, one: 1 })).to.equal(1);
      });

      it('findOne returns a matching document or null', async () => {
        const items = store.collection('items');
        expect(await items.findOne({ kind: 'b', n: 20 })).to.deep.equal(ITEMS[1]);
        expect(await items.findOne({ kind: 'c' })).to.equal(null);
      });

      it('count honours the filter', async () => {
        const items = store.collection('items');
        expect(await items.count()).to.equal(4);
        expect(await items.count({ kind: 'a' })).to.equal(2);
        expect(await items.count({ note: null })).to.equal(2);
      });
    });

    describe('sort, skip and limit', () => {
      beforeEach(async () => {
        const fruit = store.collection('fruit');
        await fruit.insert({ id: 10, name: 'pear', createdAt: 3000 });
        await fruit.insert({ id: 9, name: 'apple', createdAt: 1000 });
        await fruit.insert({ id: 100, name: 'fig', createdAt: 4000 });
        await fruit.insert({ id: 2, name: 'banana', createdAt: 2000 });
      });

      const idsSortedBy = async (
        field: string,
        direction: 'asc' | 'desc',
        page: { skip?: number; limit?: number } = {},
      ) => (await store.collection('fruit').find({}, { sort: { field, direction }, ...page })).map((doc) => doc.id);

      it('sorts numeric ids numerically, both ways', async () => {
        expect(await idsSortedBy('id', 'asc')).to.deep.equal([2, 9, 10, 100]);
        expect(await idsSortedBy('id', 'desc')).to.deep.equal([100, 10, 9, 2]);
      });

      it('sorts strings, both ways', async () => {
        expect(await idsSortedBy('name', 'asc')).to.deep.equal([9, 2, 100, 10]);
        expect(await idsSortedBy('name', 'desc')).to.deep.equal([10, 100, 2, 9]);
      });

      it('sorts by createdAt', async () => {
        expect(await idsSortedBy('createdAt', 'desc')).to.deep.equal([100, 10, 2, 9]);
      });

      it('pages with skip and limit', async () => {
        expect(await idsSortedBy('id', 'asc', { skip: 1, limit: 2 })).to.deep.equal([9, 10]);
        expect(await idsSortedBy('id', 'asc', { skip: 3 })).to.deep.equal([100]);
        expect(await idsSortedBy('id', 'asc', { skip: 4 })).to.deep.equal([]);
        expect(await idsSortedBy('id', 'desc', { limit: 1 })).to.deep.equal([100]);
      });

      it('returns nothing for limit 0', async () => {
        expect(await idsSortedBy('id', 'asc', { limit: 0 })).to.deep.equal([]);
      });

      it('starts a page at a value of the sort field (keyset paging), both ways, of its type only', async () => {
        const fruit = store.collection('fruit');
        await fruit.insert({ id: 11, name: 'kiwi', createdAt: 3000 });
        await fruit.insert({ id: 12, name: 'lime', createdAt: '3000' });
        const page = async (direction: 'asc' | 'desc', startAt: string | number, skip = 0, limit = 10) =>
          (await fruit.find({}, { sort: { field: 'createdAt', direction }, startAt, skip, limit })).map(
            (doc) => doc.id,
          );
        expect(await page('desc', 3000)).to.deep.equal([11, 10, 2, 9]);
        expect(await page('desc', 3000, 1, 2)).to.deep.equal([10, 2]);
        expect(await page('asc', 3000)).to.deep.equal([10, 11, 100]);
        expect(await page('desc', 999)).to.deep.equal([]);
        expect(await page('desc', '3000')).to.deep.equal([12]);
        expect(
          (await fruit.find({ name: 'pear' }, { sort: { field: 'createdAt', direction: 'desc' }, startAt: 3000 })).map(
            (doc) => doc.id,
          ),
        ).to.deep.equal([10]);
      });

      it('counts at most atMost when given (a capped count), exactly otherwise', async () => {
        const logs = store.collection({ name: 'logs', indexes: [['kind', 'id']] });
        await logs.insertMany(Array.from({ length: 12 }, (_, n) => ({ id: n + 1, kind: n % 3 === 0 ? 'b' : 'a' })));
        expect(await logs.count({ kind: 'a' }, undefined, 5)).to.equal(5);
        expect(await logs.count({ kind: 'a' }, undefined, 100)).to.equal(8);
        expect(await logs.count({ kind: 'b' })).to.equal(4);
        expect(await logs.count({}, undefined, 0)).to.equal(0);
      });

      it('pages a filter sorted by the last field of a compound index, from a start value', async () => {
        const logs = store.collection({ name: 'logs', indexes: [['kind', 'id'], 'kind'] });
        await logs.insertMany(Array.from({ length: 12 }, (_, n) => ({ id: n + 1, kind: n % 3 === 0 ? 'b' : 'a' })));
        const ids = async (startAt: number, direction: 'asc' | 'desc') =>
          (await logs.find({ kind: 'a' }, { sort: { field: 'id', direction }, startAt, skip: 1, limit: 3 })).map(
            (doc) => doc.id,
          );
        expect(await ids(9, 'desc')).to.deep.equal([8, 6, 5]);
        expect(await ids(3, 'asc')).to.deep.equal([5, 6, 8]);
      });
    });

    describe('text search', () => {
      const NAMES = [
        { id: 1, name: 'Payroll App', owner: 'alice', kind: 'a' },
        { id: 2, name: 'payroll-batch', owner: 'bob', kind: 'b' },
        { id: 3, name: 'Wiki (50% off) [beta].*', owner: 'carol', kind: 'a' },
        { id: 4, name: 42, owner: 'dave_payroll', kind: 'a' },
        { id: 5, owner: 'erin', kind: 'b' },
        { id: 6, name: 'a_b%c', owner: 'frank', kind: 'b' },
      ];

      beforeEach(async () => {
        const names = store.collection('names');
        for (const item of NAMES) await names.insert(item);
      });

      const found = async (text: string, fields = ['name'], filter = {}) => {
        const names = store.collection('names');
        const search = { fields, text };
        const docs = await names.find(filter, { search, sort: { field: 'id', direction: 'asc' } });
        expect(await names.count(filter, search), `count of ${JSON.stringify(text)}`).to.equal(docs.length);
        return docs.map((doc) => doc.id);
      };

      it('matches a substring of any of the fields, ASCII letters without case', async () => {
        expect(await found('PAYROLL')).to.deep.equal([1, 2]);
        expect(await found('roll', ['name', 'owner'])).to.deep.equal([1, 2, 4]);
        expect(await found('app')).to.deep.equal([1]);
      });

      it('takes wildcard and pattern characters as themselves', async () => {
        expect(await found('%')).to.deep.equal([3, 6]);
        expect(await found('_')).to.deep.equal([6]);
        expect(await found('a_b%')).to.deep.equal([6]);
        expect(await found('.*')).to.deep.equal([3]);
        expect(await found('[beta]')).to.deep.equal([3]);
        expect(await found('(50% off)')).to.deep.equal([3]);
        expect(await found('^P')).to.deep.equal([]);
        expect(await found('a.p')).to.deep.equal([]);
        expect(await found('\\')).to.deep.equal([]);
      });

      it('matches string values only, and never a document without the field', async () => {
        expect(await found('42')).to.deep.equal([]);
        expect(await found('e')).to.deep.equal([3]);
      });

      it('combines with the filter, skip and limit', async () => {
        expect(await found('payroll', ['name', 'owner'], { kind: 'a' })).to.deep.equal([1, 4]);
        const page = await store
          .collection('names')
          .find(
            {},
            { search: { fields: ['owner'], text: 'R' }, sort: { field: 'id', direction: 'asc' }, skip: 1, limit: 2 },
          );
        expect(page.map((doc) => doc.id)).to.deep.equal([4, 5]);
      });

      it('matches every document with empty text, and none with no field to look in', async () => {
        expect(await found('')).to.deep.equal([1, 2, 3, 4, 5, 6]);
        expect(await found('payroll', [])).to.deep.equal([]);
      });

      it('keeps to its tenant', async () => {
        await store.collection('names', 'other').insert({ id: 1, name: 'Payroll elsewhere' });
        expect(await found('elsewhere')).to.deep.equal([]);
      });
    });

    describe('update', () => {
      it('sets the given fields, keeps the others and returns the result', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', v: 1, keep: 'me' });
        const updated = await codes.update('a', { v: 2, added: true });
        expect(updated).to.deep.equal({ id: 'a', v: 2, keep: 'me', added: true });
        expect(await codes.get('a')).to.deep.equal(updated);
      });

      it('returns null for an unknown id', async () => {
        expect(await store.collection(CODES).update('missing', { v: 1 })).to.equal(null);
      });

      it('applies only when the document matches onlyIf', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', state: 'issued', consumed: null });
        expect(await codes.update('a', { state: 'revoked' }, { state: 'consumed' })).to.equal(null);
        expect(await codes.get('a')).to.include({ state: 'issued' });
        expect(await codes.update('a', { consumed: true }, { state: 'issued', consumed: null })).to.include({
          consumed: true,
        });
        expect(await codes.update('a', { consumed: false }, { consumed: null })).to.equal(null);
      });

      it('matches onlyIf null against an absent field', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a' });
        expect(await codes.update('a', { consumed: true }, { consumed: null })).to.deep.equal({
          id: 'a',
          consumed: true,
        });
      });

      it('never changes the id', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', v: 1 });
        expect(await codes.update('a', { id: 'b', v: 2 })).to.deep.equal({ id: 'a', v: 2 });
        expect(await codes.get('b')).to.equal(null);
      });

      it('can set expiresAt to make the document expire', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a' });
        await codes.update('a', { expiresAt: past() });
        expect(await codes.get('a')).to.equal(null);
      });

      itConcurrently('lets exactly one of many parallel conditional updates win', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'code', consumed: null });
        const results = await Promise.all(
          Array.from({ length: PARALLEL }, () => codes.update('code', { consumed: true }, { consumed: null })),
        );
        expect(results.filter((result) => result !== null)).to.have.length(1);
      });
    });

    describe('delete and deleteMany', () => {
      it('delete removes the document and reports whether there was one', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a' });
        expect(await codes.delete('a')).to.equal(true);
        expect(await codes.get('a')).to.equal(null);
        expect(await codes.delete('a')).to.equal(false);
      });

      it('deleteMany removes exactly the matching documents and counts them', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', grantId: 'g1' });
        await codes.insert({ id: 'b', grantId: 'g1' });
        await codes.insert({ id: 'c', grantId: 'g2' });
        expect(await codes.deleteMany({ grantId: 'g1' })).to.equal(2);
        expect((await codes.find()).map((doc) => doc.id)).to.deep.equal(['c']);
        expect(await codes.deleteMany({ grantId: 'g1' })).to.equal(0);
      });

      it('deleteMany with a limit removes at most that many of the matching, in its tenant, so a large sweep goes in steps', async () => {
        const codes = store.collection(CODES);
        await codes.insertMany(Array.from({ length: 5 }, (_, n) => ({ id: `s${n}`, grantId: 'g1', kind: null })));
        await codes.insert({ id: 'other', grantId: 'g2' });
        await store.collection(CODES, 'acme').insert({ id: 's9', grantId: 'g1' });
        expect(await codes.deleteMany({ grantId: 'g1', kind: null }, 2)).to.equal(2);
        expect(await codes.deleteMany({ grantId: 'g1' }, 2)).to.equal(2);
        expect(await codes.deleteMany({ grantId: 'g1' }, 2)).to.equal(1);
        expect(await codes.deleteMany({ grantId: 'g1' }, 2)).to.equal(0);
        expect((await codes.find()).map((doc) => doc.id)).to.deep.equal(['other']);
        expect(await store.collection(CODES, 'acme').count(), 'another tenant').to.equal(1);
      });

      it('deleteMany with an exception keeps the matching documents that also match it, and deletes those lacking its field', async () => {
        const codes = store.collection(CODES);
        await codes.insertMany([
          { id: 'old-1', clientId: 'c', mark: 'e1' },
          { id: 'old-2', clientId: 'c', mark: 'e1', kind: 'x' },
          { id: 'unmarked', clientId: 'c' },
          { id: 'null-marked', clientId: 'c', mark: null },
          { id: 'new', clientId: 'c', mark: 'e2' },
          { id: 'new-x', clientId: 'c', mark: 'e2', kind: 'x' },
          { id: 'other', clientId: 'd', mark: 'e1' },
        ]);
        expect(await codes.deleteMany({ clientId: 'c' }, 1, { mark: 'e2' })).to.equal(1);
        expect(await codes.deleteMany({ clientId: 'c' }, 10, { mark: 'e2' })).to.equal(3);
        expect(await codes.deleteMany({ clientId: 'c' }, 10, { mark: 'e2' })).to.equal(0);
        expect(await codes.deleteMany({ clientId: 'c' }, undefined, { mark: 'e2', kind: 'x' })).to.equal(1);
        expect((await codes.find()).map((doc) => doc.id).sort()).to.deep.equal(['new-x', 'other']);
      });

      it('deleteBefore removes the documents whose field is below the bound, in its tenant, of that type only', async () => {
        const logs = store.collection({ name: 'logs', indexes: ['createdAt'] });
        await logs.insert({ id: 1, createdAt: '2026-01-01T00:00:00.000Z' });
        await logs.insert({ id: 2, createdAt: '2026-03-01T00:00:00.000Z' });
        await logs.insert({ id: 3, createdAt: '2026-06-01T00:00:00.000Z' });
        await logs.insert({ id: 4, createdAt: 5 });
        await logs.insert({ id: 5 });
        await store
          .collection({ name: 'logs', indexes: ['createdAt'] }, 'acme')
          .insert({ id: 1, createdAt: '2025-01-01T00:00:00.000Z' });
        expect(await logs.deleteBefore('createdAt', '2026-06-01T00:00:00.000Z')).to.equal(2);
        expect((await logs.find()).map((doc) => doc.id)).to.deep.equal([3, 4, 5]);
        expect(await logs.deleteBefore('createdAt', 10)).to.equal(1);
        expect((await logs.find()).map((doc) => doc.id)).to.deep.equal([3, 5]);
        expect(await store.collection('logs', 'acme').count(), 'another tenant').to.equal(1);
      });

      it('deleteBefore with a limit removes at most that many, so a large purge goes in steps', async () => {
        const logs = store.collection({ name: 'logs', indexes: ['createdAt'] });
        await logs.insertMany(
          Array.from({ length: 7 }, (_, n) => ({ id: n + 1, createdAt: `2026-01-0${n + 1}T00:00:00.000Z` })),
        );
        expect(await logs.deleteBefore('createdAt', '2027', 3)).to.equal(3);
        expect(await logs.deleteBefore('createdAt', '2027', 3)).to.equal(3);
        expect(await logs.deleteBefore('createdAt', '2027', 3)).to.equal(1);
        expect(await logs.deleteBefore('createdAt', '2027', 3)).to.equal(0);
        expect(await logs.count()).to.equal(0);
      });
    });

    describe('expiry', () => {
      it('hides an expired document from get, findOne, find, count and update', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'old', kind: 'k', expiresAt: past() });
        expect(await codes.get('old')).to.equal(null);
        expect(await codes.findOne({ kind: 'k' })).to.equal(null);
        expect(await codes.find()).to.deep.equal([]);
        expect(await codes.count({ kind: 'k' })).to.equal(0);
        expect(await codes.update('old', { kind: 'revived' })).to.equal(null);
      });

      it('shows a document until its expiresAt', async () => {
        const codes = store.collection(CODES);
        const doc = { id: 'fresh', expiresAt: future() };
        await codes.insert(doc);
        expect(await codes.get('fresh')).to.deep.equal(doc);
        expect(await codes.count()).to.equal(1);
      });

      it('lets insert reuse the id of an expired document', async () => {
        const codes = store.collection(CODES);
        await codes.insert({ id: 'a', v: 1, expiresAt: past() });
        await codes.insert({ id: 'a', v: 2 });
        expect(await codes.get('a')).to.deep.equal({ id: 'a', v: 2 });
      });

      it('purgeExpired removes expired documents of every collection and tenant, and only those', async () => {
        await store.collection(CODES).insert({ id: 'a', expiresAt: past() });
        await store.collection(CODES, 'acme').insert({ id: 'a', expiresAt: past() });
        await store.collection(USERS).insert({ id: 'u', expiresAt: past() });
        await store.collection(CODES).insert({ id: 'live', expiresAt: future() });
        await store.collection(CODES).insert({ id: 'forever' });
        expect(await store.purgeExpired()).to.equal(3);
        expect(await store.purgeExpired()).to.equal(0);
        expect(await store.collection(CODES).count()).to.equal(2);
      });

      it('purgeExpired deletes a large backlog in steps, giving the event loop back between them', async () => {
        const codes = store.collection(CODES);
        // Enough for several steps of at most 1,000; few enough for FerretDB to delete within its socket timeout.
        const expired = 2_500;
        for (let from = 0; from < expired; from += 500)
          await codes.insertMany(
            Array.from({ length: 500 }, (_, index) => ({ id: `e${from + index}`, expiresAt: past() })),
          );
        await codes.insert({ id: 'live', expiresAt: future() });
        let purged = false;
        const purge = store.purgeExpired().then((removed) => {
          purged = true;
          return removed;
        });
        // A timer set now fires before the purge's second pause ends: a purge in one go would be done by then.
        await new Promise((resolve) => setTimeout(resolve, 0));
        expect(purged, 'the purge ended before a timer set as it started could fire').to.equal(false);
        expect(await codes.get('live')).to.include({ id: 'live' });
        expect(await purge).to.equal(expired);
        expect(await codes.count()).to.equal(1);
      });
    });

    describe('nextSequence', () => {
      it('counts 1, 2, 3 for each name independently', async () => {
        expect([
          await store.nextSequence('a'),
          await store.nextSequence('a'),
          await store.nextSequence('b'),
          await store.nextSequence('a'),
        ]).to.deep.equal([1, 2, 1, 3]);
      });

      it('reserves a block of values with a count, returning its last', async () => {
        expect(await store.nextSequence('block', 10)).to.equal(10);
        expect(await store.nextSequence('block')).to.equal(11);
        expect(await store.nextSequence('block', 5)).to.equal(16);
      });

      itConcurrently('never hands out a value twice to parallel callers', async () => {
        const values = await Promise.all(Array.from({ length: PARALLEL }, () => store.nextSequence('parallel')));
        expect([...values].sort((a, b) => a - b)).to.deep.equal(
          Array.from({ length: PARALLEL }, (_, index) => index + 1),
        );
      });
    });

    describe('window counters (addToWindow, readWindows)', () => {
      const WINDOW_MS = 60_000;

      it('counts within a window that ends windowMs after its first count, each key on its own', async () => {
        const before = Date.now();
        const first = await store.addToWindow('k', WINDOW_MS);
        expect(first.count).to.equal(1);
        expect(first.resetAt).to.be.within(before + WINDOW_MS, Date.now() + WINDOW_MS);
        expect(await store.addToWindow('k', WINDOW_MS, 3)).to.deep.equal({ count: 4, resetAt: first.resetAt });
        expect((await store.addToWindow('other', WINDOW_MS)).count).to.equal(1);
        const read = await store.readWindows(['k', 'other', 'never']);
        expect(Object.fromEntries(read)).to.deep.equal({
          k: { count: 4, resetAt: first.resetAt },
          other: { count: 1, resetAt: read.get('other')!.resetAt },
        });
        expect((await store.readWindows([])).size).to.equal(0);
      });

      it('starts a new window once one has ended, and reads no ended window', async () => {
        await untilPast((await store.addToWindow('short', 50, 5)).resetAt);
        expect((await store.readWindows(['short'])).size).to.equal(0);
        const restarted = await store.addToWindow('short', WINDOW_MS);
        expect(restarted.count).to.equal(1);
        expect(restarted.resetAt).to.be.above(Date.now() + WINDOW_MS / 2);
        await untilPast((await store.addToWindow('ended', 1)).resetAt);
        await store.purgeExpired();
        expect((await store.addToWindow('ended', WINDOW_MS)).count, 'purged, then counted afresh').to.equal(1);
      });

      itConcurrently('loses no count to parallel callers, new window or not', async () => {
        const counts = await Promise.all(Array.from({ length: PARALLEL }, () => store.addToWindow('race', WINDOW_MS)));
        expect(counts.map((counted) => counted.count).sort((a, b) => a - b)).to.deep.equal(
          Array.from({ length: PARALLEL }, (_, index) => index + 1),
        );
        expect(new Set(counts.map((counted) => counted.resetAt)).size, 'one window').to.equal(1);
      });
    });

    describe('write listeners (onWrite) and reads kept for a turn (TurnReads)', () => {
      it('tells its listeners that each kind of write has ended, a refused one too, before the writer is answered', async () => {
        let told = 0;
        store.onWrite(() => told++);
        const codes = store.collection(CODES);
        const users = store.collection(USERS);
        const writes: [string, () => Promise<unknown>][] = [
          ['insert', () => codes.insert({ id: 'w1', grantId: 'g' })],
          [
            'insertMany',
            () =>
              codes.insertMany([
                { id: 'w2', grantId: 'g' },
                { id: 'w3', grantId: 'g' },
              ]),
          ],
          ['upsert', () => codes.upsert({ id: 'w1', grantId: 'h' })],
          ['update', () => codes.update('w2', { grantId: 'h' })],
          ['delete', () => codes.delete('w3')],
          ['deleteMany', () => codes.deleteMany({ grantId: 'h' })],
          ['deleteBefore', () => codes.deleteBefore('grantId', 'a')],
          [
            'insert refused (unique key)',
            async () => {
              await users.insert({ id: 'u1', email: 'same@example.test' });
              const before = told;
              await expectConflict(users.insert({ id: 'u2', email: 'same@example.test' }), ['email']);
              expect(told, 'told of the refused insert').to.be.above(before);
            },
          ],
        ];
        for (const [kind, write] of writes) {
          const before = told;
          await write();
          expect(told, kind).to.be.above(before);
        }
      });

      it('drops a kept read once a write ends: a reader that runs after the writer was answered sees the write', async () => {
        const reads = new TurnReads<StoredDoc[]>();
        const codes = store.collection(CODES);
        let loads = 0;
        const grantG = () => reads.read(store, 'grant g', async () => (loads++, codes.find({ grantId: 'g' })));
        expect(await grantG()).to.deep.equal([]);
        expect(await grantG(), 'kept for the turn').to.deep.equal([]);
        expect(loads).to.equal(1);

        // In a later turn, read while the insert is under way (a SQLite group commit waits for the turn's end): that value is from before the insert.
        await new Promise((resolve) => setImmediate(resolve));
        const inserted = codes.insert({ id: 'seen', grantId: 'g' });
        await grantG();
        await inserted;
        expect(await grantG(), 'read after the insert was answered').to.deep.equal([{ id: 'seen', grantId: 'g' }]);
      });

      it('shares a read under way with the callers that ask for it before it settles, unless a write ended since it started', async () => {
        const reads = new TurnReads<StoredDoc[]>();
        const codes = store.collection(CODES);
        let loads = 0;
        const grantH = () => reads.read(store, 'grant h', async () => (loads++, codes.find({ grantId: 'h' })));
        const together = await Promise.all([grantH(), grantH(), grantH()]);
        expect(together).to.deep.equal([[], [], []]);
        expect(loads, 'one read for the three').to.equal(1);

        await new Promise((resolve) => setImmediate(resolve));
        const before = grantH();
        await codes.insert({ id: 'seen-h', grantId: 'h' });
        // The write has ended: the read started before it is not joined.
        expect(await grantH(), 'read after the write ended').to.deep.equal([{ id: 'seen-h', grantId: 'h' }]);
        await before;
      });

      it('shares a read, in later turns too, with the requests that began before it started, not with one that began after', async () => {
        const reads = new TurnReads<StoredDoc[]>();
        const codes = store.collection(CODES);
        let loads = 0;
        const grantK = () => reads.read(store, 'grant k', async () => (loads++, codes.find({ grantId: 'k' })));
        const gate = opened();
        const early = asRequestBegunNow(async () => (await gate.promise, grantK()));
        await nextTurn();
        expect(await asRequestBegunNow(grantK)).to.deep.equal([]);
        await nextTurn();
        gate.open();
        expect(await early, 'a request that began before the read').to.deep.equal([]);
        expect(loads, 'shared').to.equal(1);
        await nextTurn();
        await asRequestBegunNow(grantK);
        expect(loads, 'a request that began after the read reads again').to.equal(2);
      });

      it('shares no read that started before a write ended with a request, even one that began before it', async () => {
        const reads = new TurnReads<StoredDoc[]>();
        const codes = store.collection(CODES);
        const grantL = () => reads.read(store, 'grant l', () => codes.find({ grantId: 'l' }));
        const gate = opened();
        const early = asRequestBegunNow(async () => (await gate.promise, grantL()));
        await nextTurn();
        expect(await asRequestBegunNow(grantL)).to.deep.equal([]);
        await codes.insert({ id: 'seen-l', grantId: 'l' });
        gate.open();
        expect(await early, 'read after the write ended').to.deep.equal([{ id: 'seen-l', grantId: 'l' }]);
      });
    });

    describe('reads kept while their collection is unchanged (Store.changesTo, TurnReads of one collection)', () => {
      beforeEach(function () {
        // PostgreSQL and MongoDB cannot tell without a round trip: their reads are kept for a turn only.
        if (!store.changesTo) this.skip();
      });

      it('keeps a read in later turns, and ends it with each kind of write before the writer is answered', async () => {
        const reads = new TurnReads<StoredDoc[]>({ collections: [CODES.name] });
        const codes = store.collection(CODES);
        let loads = 0;
        const grantM = () => reads.read(store, 'grant m', async () => (loads++, codes.find({ grantId: 'm' })));
        await codes.insertMany([
          { id: 'm1', grantId: 'm' },
          { id: 'm2', grantId: 'x' },
        ]);
        const writes: [string, () => Promise<unknown>, string[]][] = [
          ['insert', () => codes.insert({ id: 'm3', grantId: 'm' }), ['m1', 'm3']],
          ['insertMany', () => codes.insertMany([{ id: 'm4', grantId: 'm' }]), ['m1', 'm3', 'm4']],
          ['upsert', () => codes.upsert({ id: 'm4', grantId: 'y' }), ['m1', 'm3']],
          ['update', () => codes.update('m2', { grantId: 'm' }), ['m1', 'm2', 'm3']],
          ['delete', () => codes.delete('m3'), ['m1', 'm2']],
          ['deleteMany', () => codes.deleteMany({ id: 'm2' }), ['m1']],
          ['deleteBefore', () => codes.deleteBefore('grantId', 'n'), []],
        ];
        expect((await grantM()).map((doc) => doc.id)).to.deep.equal(['m1']);
        for (const [kind, write, after] of writes) {
          await nextTurn();
          const before = loads;
          await grantM();
          expect(loads, `kept in a later turn, before ${kind}`).to.equal(before);
          await write();
          expect((await grantM()).map((doc) => doc.id).sort(), `read at once after ${kind}`).to.deep.equal(after);
          expect(loads, `read again after ${kind}`).to.equal(before + 1);
        }
        // A write to another collection leaves the read kept.
        await store.collection(USERS).insert({ id: 'other', email: 'other@example.test' });
        await nextTurn();
        const before = loads;
        await grantM();
        expect(loads, 'kept after a write elsewhere').to.equal(before);
      });

      it('keeps at most 2,000 reads per kind, the oldest let go first', async () => {
        const reads = new TurnReads<StoredDoc | null>({ collections: [CODES.name] });
        const codes = store.collection(CODES);
        const loaded = new Set<string>();
        const read = (id: string) => reads.read(store, id, async () => (loaded.add(id), codes.get(id)));
        for (let index = 0; index <= 2000; index++) await read(`n${index}`);
        await nextTurn();
        loaded.clear();
        await read('n2000');
        await read('n1');
        expect(loaded.has('n2000'), 'the newest kept').to.equal(false);
        await read('n0');
        expect(loaded.has('n0'), 'the oldest let go').to.equal(true);
      });

      it('keeps a document the store lets expire by itself no longer than until it expires (its expiry writes nothing)', async () => {
        const reads = new TurnReads<StoredDoc | null>({ collections: [CODES.name] });
        const codes = store.collection(CODES);
        await codes.insert({ id: 'soon', grantId: 'e', expiresAt: Date.now() + 300 });
        const soon = () => reads.read(store, 'soon', () => codes.get('soon'));
        expect(await soon()).to.include({ id: 'soon' });
        const deadline = Date.now() + 5_000;
        while ((await soon()) !== null) {
          expect(Date.now(), 'served after it expired').to.be.below(deadline);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      });
    });

    describe('ping', () => {
      it('resolves while the store answers', async () => {
        await store.ping();
      });
    });
  });
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** A promise opened by hand: `open()` resolves it. */
function opened(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
