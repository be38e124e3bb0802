import { createRequire } from 'node:module';
import type { Collection, Db, MongoClient, Filter as MongoFilter, UpdateFilter } from 'mongodb';
import {
  ConflictError,
  DEFAULT_TENANT,
  StoreUnavailableError,
  type CollectionSpec,
  type Filter,
  type FindOptions,
  type Store,
  type StoredDoc,
  type TenantCollection,
  type TextSearch,
  type WindowCount,
} from '../../src/store/types.js';
import {
  DeclaredSpecs,
  activeSearch,
  PHYSICAL_PREFIX,
  assertFieldName,
  assertFilterValues,
  expiryOf,
  idKey,
  indexFields,
  isUnset,
  normalizeSpec,
  pageOf,
  physicalName,
  uniqueKeyFields,
} from '../shared/spec.js';
import { isSystemError } from '../shared/system-errors.js';
import { Unresponsive } from '../shared/unresponsive.js';
import { WriteListeners } from '../shared/write-listeners.js';

type MongoDriver = typeof import('mongodb');
let driver: MongoDriver | undefined;

/**
 * The MongoDB driver (CommonJS, hence require), loaded when a MongoDB store is opened: loading it
 * costs about 100 ms of CPU, which every process on SQLite or PostgreSQL (the CLI, a server, a
 * test worker) would pay for nothing. Every use below comes after open().
 */
function mongodb(): MongoDriver {
  driver ??= createRequire(import.meta.url)('mongodb') as MongoDriver;
  return driver;
}

/**
 * How a store document is kept: one MongoDB document ("row") per tenant and id,
 * with the store document untouched under `doc` so its fields can never collide
 * with ours.
 */
interface Row {
  /** `<tenant>/<id>` (RowKeys): the id is unique per tenant. */
  _id: string;
  tenant: string;
  doc: StoredDoc;
  /** Date copy of `doc.expiresAt` for the TTL index; absent when the document never expires. */
  _expiresAtDate?: Date;
  /** Per unique-key field, the value the unique indexes see (see uniqueShadow). */
  _unique?: Record<string, unknown>;
}

type Rows = Collection<Row>;

/** A counter of addToWindow; `resetAt` a Date so that a TTL index can drop ended windows. */
interface CounterRow {
  _id: string;
  count: number;
  resetAt: Date;
}

/** Attempts of addToWindow's three steps before it gives up: each lost race means another writer moved on. */
const COUNTER_ATTEMPTS = 5;

/** The collection of addToWindow's counters (store collections are `c_<name>`, so it cannot clash). */
const COUNTERS = 'window_counters';

const INTERNAL_ERROR = 1;
const DUPLICATE_KEY = 11000;
const NAMESPACE_NOT_FOUND = 26;
const NOT_IMPLEMENTED = 238;

/**
 * Scale-out store on MongoDB (any server speaking its wire protocol; the tests
 * use FerretDB). Collection `c_<name>` per store collection, `sequences` for
 * sequences, `window_counters` for addToWindow. The indexes of the collections named at open are created before
 * open() resolves; those of any other collection, or of keys declared later, on
 * its first use.
 */
export class MongoStore implements Store {
  /** Store.caveats: set by open once the server has said what it is. */
  caveats: readonly string[] = [];
  private readonly declared = new DeclaredSpecs();
  private readonly indexesReady = new Map<string, Promise<void>>();
  private readonly writeListeners = new WriteListeners();
  private countersReady: Promise<Collection<CounterRow>> | undefined;

  /** Shared with its collections: after a lost connection, calls fail at once until a ping answers. */
  private readonly unresponsive = new Unresponsive('MongoDB', () => this.db.command({ ping: 1 }));

  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
    private readonly keys: RowKeys,
  ) {}

  /**
   * `url` names the database in its path (the driver's default, `test`, otherwise).
   * The indexes of the `known` collections exist once this resolves; it rejects when they cannot be created.
   */
  static async open(url: string, known: readonly CollectionSpec[] = []): Promise<MongoStore> {
    // ignoreUndefined: an undefined field is left out, as JSON.stringify does in the SQLite store.
    const client = new (mongodb().MongoClient)(url, { ignoreUndefined: true, ...boundedTimeouts(url) });
    await client.connect();
    let store: MongoStore;
    try {
      store = new MongoStore(client, client.db(), await RowKeys.of(client.db()));
      store.caveats = await caveatsOf(client);
      await Promise.all(
        known.map((specOrName) => {
          const { spec, rows } = store.declare(specOrName);
          return store.indexed(spec, rows);
        }),
      );
    } catch (error) {
      await client.close();
      throw error;
    }
    return store;
  }

  collection<T extends StoredDoc = StoredDoc>(
    specOrName: CollectionSpec | string,
    tenant = DEFAULT_TENANT,
  ): TenantCollection<T> {
    const { spec, rows } = this.declare(specOrName);
    return new MongoCollection<T>(
      rows,
      spec,
      this.keys,
      tenant,
      () => this.indexed(spec, rows),
      () => this.writeListeners.tell(),
      this.unresponsive,
    );
  }

  onWrite(listener: () => void): void {
    this.writeListeners.add(listener);
  }

  /** Records a declaration; a new collection, unique key or index starts its index creation. */
  private declare(specOrName: CollectionSpec | string): { spec: CollectionSpec; rows: Rows } {
    const { spec, grew } = this.declared.declare(normalizeSpec(specOrName));
    const rows = this.db.collection<Row>(physicalName(spec.name));
    // Not awaited: the operations that need the indexes wait for them (indexed()), and a failure is forgotten there.
    if (grew) void this.startIndexing(spec, rows);
    return { spec, rows };
  }

  private startIndexing(spec: CollectionSpec, rows: Rows): Promise<void> {
    const attempt = createIndexes(rows, spec, this.keys);
    this.indexesReady.set(spec.name, attempt);
    // A failed attempt is forgotten, so the next operation tries again instead of failing forever.
    attempt.catch(() => {
      if (this.indexesReady.get(spec.name) === attempt) this.indexesReady.delete(spec.name);
    });
    return attempt;
  }

  private indexed(spec: CollectionSpec, rows: Rows): Promise<void> {
    return this.indexesReady.get(spec.name) ?? this.startIndexing(spec, rows);
  }

  async nextSequence(name: string, count = 1): Promise<number> {
    const sequences = this.db.collection<{ _id: string; value: number }>('sequences');
    const bump = () =>
      sequences.findOneAndUpdate({ _id: name }, { $inc: { value: count } }, { upsert: true, returnDocument: 'after' });
    // Two first calls may both try to create the counter; the loser's duplicate-key error only means it exists now.
    const counter = await bump().catch((error: unknown) => (isDuplicateKey(error) ? bump() : Promise.reject(error)));
    if (!counter) throw new Error(`sequence ${name} was not returned by the server`);
    return counter.value;
  }

  /**
   * Increments within the window (one findOneAndUpdate, the usual case); else restarts an ended
   * window; else creates the counter. Each step is one atomic document write whose filter says
   * which state it expects, so a writer that loses a race to another node sees its step match
   * nothing (or a duplicate key) and goes on to the next state, never counting twice or losing a count.
   */
  async addToWindow(key: string, windowMs: number, amount = 1): Promise<WindowCount> {
    const counters = await this.counters();
    for (let attempt = 0; attempt < COUNTER_ATTEMPTS; attempt += 1) {
      const now = new Date();
      const counted = await counters.findOneAndUpdate(
        { _id: key, resetAt: { $gt: now } },
        { $inc: { count: amount } },
        { returnDocument: 'after' },
      );
      if (counted) return windowCountOf(counted);
      const fresh = { count: amount, resetAt: new Date(now.getTime() + windowMs) };
      const restarted = await counters.findOneAndUpdate(
        { _id: key, resetAt: { $lte: now } },
        { $set: fresh },
        { returnDocument: 'after' },
      );
      if (restarted) return windowCountOf(restarted);
      try {
        await counters.insertOne({ _id: key, ...fresh });
        return windowCountOf(fresh);
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
    }
    throw new Error(`window counter ${key}: lost ${COUNTER_ATTEMPTS} races in a row`);
  }

  async readWindows(keys: readonly string[]): Promise<Map<string, WindowCount>> {
    if (keys.length === 0) return new Map();
    const counters = await this.counters();
    const rows = await counters.find({ _id: { $in: [...keys] }, resetAt: { $gt: new Date() } }).toArray();
    return new Map(rows.map((row) => [row._id, windowCountOf(row)]));
  }

  /** The counters' collection, once its expiry index exists (made on first use). */
  private counters(): Promise<Collection<CounterRow>> {
    if (!this.countersReady) {
      const counters = this.db.collection<CounterRow>(COUNTERS);
      const ready = createExpiryIndex(counters, 'resetAt').then(() => counters);
      ready.catch(() => {
        if (this.countersReady === ready) this.countersReady = undefined;
      });
      this.countersReady = ready;
    }
    return this.countersReady;
  }

  /** The server's time, as its `hello` answer says (localTime). */
  async clock(): Promise<number> {
    const { localTime } = await this.db.command({ hello: 1 });
    if (!(localTime instanceof Date)) throw new Error('the MongoDB server did not say its time (hello.localTime)');
    return localTime.getTime();
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 });
  }

  /**
   * Covers every store collection in the database, also those this process has not declared.
   * MongoDB deletes expired rows itself (TTL indexes); FerretDB cannot, so this does, one
   * deleteMany per collection: the store server does the work, no request of this process waits
   * for it (steps would not help on FerretDB 1.x: it scans the collection for each of them).
   */
  async purgeExpired(): Promise<number> {
    const collections = await this.db.listCollections({}, { nameOnly: true }).toArray();
    let removed = 0;
    for (const { name } of collections.filter((info) => info.name.startsWith(PHYSICAL_PREFIX))) {
      removed += await deleteExpired(this.db.collection<Row>(name));
    }
    // Ended windows too (no TTL index on FerretDB); they are not documents, and not counted.
    await this.db.collection<CounterRow>(COUNTERS).deleteMany({ resetAt: { $lte: new Date() } });
    return removed;
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

class MongoCollection<T extends StoredDoc> implements TenantCollection<T> {
  constructor(
    private readonly rows: Rows,
    private readonly spec: CollectionSpec,
    private readonly keys: RowKeys,
    readonly tenant: string,
    private readonly indexed: () => Promise<void>,
    /** Told when a write has ended, stored or not (Store.onWrite); see tellWritesEnded. */
    readonly wrote: () => void,
    /** The store's (translateConnectionLoss). */
    readonly unresponsive: Unresponsive,
  ) {}

  async insert(doc: T): Promise<T> {
    await this.indexed();
    const insert = () => this.rows.insertOne(this.rowOf(doc));
    await this.retryingExpiredClash(insert, () => this.clashingFields(doc, true));
    return doc;
  }

  /**
   * One ordered bulk insert: the server stops at the first clash. What it stored before the clash
   * stays, and is not sent again when the rest is retried after purging expired rows.
   */
  async insertMany(docs: readonly T[]): Promise<T[]> {
    if (docs.length === 0) return [];
    await this.indexed();
    const rows = docs.map((doc) => this.rowOf(doc));
    let stored = 0;
    const insertRest = async () => {
      try {
        await this.rows.insertMany(rows.slice(stored), { ordered: true });
      } catch (error) {
        if (error instanceof mongodb().MongoBulkWriteError) stored += error.insertedCount;
        throw error;
      }
    };
    await this.retryingExpiredClash(insertRest, () => this.clashingFields(docs[stored]!, true)); // the clash is the first document not stored
    return [...docs];
  }

  async upsert(doc: T): Promise<T> {
    await this.indexed();
    const row = this.rowOf(doc);
    const replace = () => this.rows.replaceOne({ _id: row._id }, row, { upsert: true });
    await this.retryingExpiredClash(replace, () => this.clashingFields(doc, false));
    return doc;
  }

  async get(id: string | number): Promise<T | null> {
    await this.indexed();
    const row = await this.rows.findOne(this.live({ _id: this.rowId(id) }));
    return (row?.doc as T | undefined) ?? null;
  }

  async getMany(ids: readonly (string | number)[]): Promise<T[]> {
    if (ids.length === 0) return [];
    await this.indexed();
    const rows = await this.rows
      .find(this.live({ _id: { $in: ids.map((id) => this.rowId(id)) } }), { projection: { doc: 1 } })
      .toArray();
    return rows.map((row) => row.doc as T);
  }

  async findOne(filter: Filter): Promise<T | null> {
    const [first] = await this.find(filter, { limit: 1 });
    return first ?? null;
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    const { skip, limit } = pageOf(options);
    // MongoDB reads limit 0 as "no limit"; the store interface means "nothing".
    if (limit === 0) return [];
    await this.indexed();
    const cursor = this.rows.find(
      this.live({ ...docFilter(filter), ...startAtFilter(options), ...searchFilter(options.search) }),
      {
        projection: { doc: 1 },
        skip,
        ...(limit && { limit }),
      },
    );
    if (options.sort) cursor.sort(sortOf(options.sort));
    return (await cursor.toArray()).map((row) => row.doc as T);
  }

  async count(filter: Filter = {}, search?: TextSearch, atMost?: number): Promise<number> {
    await this.indexed();
    const limit = atMost === undefined ? {} : { limit: Math.max(0, Math.floor(atMost)) };
    // countDocuments reads limit 0 as "no limit".
    if (limit.limit === 0) return 0;
    return this.rows.countDocuments(this.live({ ...docFilter(filter), ...searchFilter(search) }), limit);
  }

  /** One findOneAndUpdate whose filter carries `onlyIf`: the server checks and writes atomically. */
  async update(id: string | number, fields: Partial<T>, onlyIf: Filter = {}): Promise<T | null> {
    await this.indexed();
    const rowId = this.rowId(id);
    const filter = this.live({ _id: rowId, ...docFilter(onlyIf) });
    const change = changeOf(fields, rowId, uniqueKeyFields(this.spec), this.keys);
    if (!change) return ((await this.rows.findOne(filter))?.doc as T | undefined) ?? null;
    const apply = () => this.rows.findOneAndUpdate(filter, change, { returnDocument: 'after' });
    const candidate = async () => ({ ...(await this.get(id)), ...fields, id }) as StoredDoc;
    const row = await this.retryingExpiredClash(apply, async () => this.clashingFields(await candidate(), false));
    return (row?.doc as T | undefined) ?? null;
  }

  /** Also removes an expired (already invisible) document, and then reports true, like the SQLite store. */
  async delete(id: string | number): Promise<boolean> {
    await this.indexed();
    return (await this.rows.deleteOne({ _id: this.rowId(id) })).deletedCount > 0;
  }

  /** Also removes matching expired documents, and counts them, like the SQLite store. */
  async deleteMany(filter: Filter, limit?: number, except?: Filter): Promise<number> {
    await this.indexed();
    const kept = except ? { $nor: [docFilter(except)] } : {};
    return this.deleting({ tenant: this.tenant, ...docFilter(filter), ...kept } as MongoFilter<Row>, limit);
  }

  /** MongoDB compares within one type only (a string bound never matches a number), as the SQLite store does. */
  async deleteBefore(field: string, bound: string | number, limit?: number): Promise<number> {
    await this.indexed();
    return this.deleting({ tenant: this.tenant, [docPath(field)]: { $lt: bound } }, limit);
  }

  /** Deletes the rows `matching`, at most `limit` of them when it is given. */
  private async deleting(matching: MongoFilter<Row>, limit: number | undefined): Promise<number> {
    if (limit === undefined) return (await this.rows.deleteMany(matching)).deletedCount;
    // deleteMany takes no limit: the ids of one step first, then those rows.
    const step = await this.rows
      .find(matching, { projection: { _id: 1 }, limit: Math.max(0, Math.floor(limit)) })
      .toArray();
    if (step.length === 0) return 0;
    // The filter again: a row that no longer matches since it was found stays.
    return (await this.rows.deleteMany({ ...matching, _id: { $in: step.map((row) => row._id) } })).deletedCount;
  }

  private rowId(id: string | number): string {
    return this.keys.rowId(this.tenant, id);
  }

  private rowOf(doc: StoredDoc): Row {
    const rowId = this.rowId(doc.id);
    const expiry = expiryOf(doc);
    const unique = Object.fromEntries(
      uniqueKeyFields(this.spec).map((field) => [field, this.keys.uniqueShadow(doc[field], rowId)]),
    );
    return {
      _id: rowId,
      tenant: this.tenant,
      doc,
      ...(expiry !== null && { _expiresAtDate: new Date(expiry) }),
      _unique: unique,
    };
  }

  /**
   * Only documents that have not expired. TTL deletion runs about once a minute
   * on MongoDB, and not at all on FerretDB, so every read filters for itself.
   */
  private live(filter: MongoFilter<Row>): MongoFilter<Row> {
    const neverExpires = { _expiresAtDate: { $exists: false } };
    return { ...filter, tenant: this.tenant, $or: [neverExpires, { _expiresAtDate: { $gt: new Date() } }] };
  }

  /**
   * Runs a write; a duplicate-key error may come from an expired row that still
   * holds the id or a unique value (expired rows are invisible but not yet
   * deleted), so expired rows are purged and the write is tried once more before
   * it counts as a conflict.
   */
  private async retryingExpiredClash<R>(write: () => Promise<R>, clashingFields: () => Promise<string[]>): Promise<R> {
    try {
      return await write();
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    await deleteExpired(this.rows);
    try {
      return await write();
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      throw new ConflictError(this.spec.name, await clashingFields());
    }
  }

  /**
   * Which constraint a rejected write broke, for ConflictError. Found by looking
   * because FerretDB's duplicate-key errors do not name the index.
   */
  private async clashingFields(candidate: StoredDoc, idTaken: boolean): Promise<string[]> {
    if (idTaken && (await this.get(candidate.id))) return ['id'];
    for (const key of this.spec.uniqueKeys ?? []) {
      if (key.some((field) => isUnset(candidate[field]))) continue;
      const sameValues = docFilter(Object.fromEntries(key.map((field) => [field, candidate[field] as Filter[string]])));
      if (await this.rows.findOne(this.live({ ...sameValues, _id: { $ne: this.rowId(candidate.id) } }))) return key;
    }
    // The clashing document vanished between the write and this look-up.
    return idTaken ? ['id'] : (this.spec.uniqueKeys?.[0] ?? ['id']);
  }
}

/**
 * The driver's defaults wait 30 s for a server to select and forever for a frozen one to answer
 * (no socket timeout), so a store that is down or stopped (SIGSTOP, a full disk that blocks the
 * server) would hold every request that long. These bound each of them to a few seconds, after
 * which the call fails with StoreUnavailableError (503). An option set in STORE_URL wins.
 */
const STORE_TIMEOUTS_MS = {
  serverSelectionTimeoutMS: 5000,
  connectTimeoutMS: 5000,
  socketTimeoutMS: 5000,
  waitQueueTimeoutMS: 5000,
};

function boundedTimeouts(url: string): Partial<typeof STORE_TIMEOUTS_MS> {
  const query = url.includes('?') ? new URLSearchParams(url.slice(url.indexOf('?') + 1)) : new URLSearchParams();
  const named = new Set([...query.keys()].map((key) => key.toLowerCase()));
  return Object.fromEntries(
    Object.entries(STORE_TIMEOUTS_MS).filter(([option]) => !named.has(option.toLowerCase())),
  ) as Partial<typeof STORE_TIMEOUTS_MS>;
}

/**
 * Lost connections surface as StoreUnavailableError (503), like a lost SQLite file: the driver
 * gave up reaching a server (selection timed out, network error or timeout, client or topology
 * closed), or the socket itself failed (a system error the driver let through unwrapped). So does
 * an error the server answered that the method did not turn into its own (a duplicate key becomes
 * ConflictError inside it): the server could not do the operation (FerretDB whose PostgreSQL is
 * down answers InternalError), which is no fault of the caller's. Applied to every public method
 * of the store and its collections.
 */
function translateConnectionLoss(prototype: object, methods: string[]): void {
  wrapEach(prototype, methods, async (operation, self) => {
    const { unresponsive } = self as { unresponsive: Unresponsive };
    unresponsive.check();
    try {
      return await operation();
    } catch (error) {
      if (isConnectionLoss(error)) unresponsive.noticed();
      throw storeErrorOf(error);
    }
  });
}

/** What a store method rejects with for an error of the driver: StoreUnavailableError for a lost connection or a server's failure, else the error itself. */
export function storeErrorOf(error: unknown): unknown {
  if (isConnectionLoss(error))
    return new StoreUnavailableError(
      `the MongoDB store cannot be reached (${(error as Error).name}: ${(error as Error).message}); the operation failed or its outcome is unknown.`,
    );
  if (isTimedOutWaiting(error))
    return new StoreUnavailableError(
      `the MongoDB store did not answer in time (${(error as Error).name}: ${(error as Error).message}); the operation failed or its outcome is unknown.`,
    );
  if (error instanceof mongodb().MongoServerError)
    return new StoreUnavailableError(
      `the MongoDB store could not do the operation (${error.codeName ?? error.code ?? error.name}: ${error.message}); it failed or its outcome is unknown.`,
    );
  return error;
}

/**
 * The driver gave up waiting: for a connection of a full pool (its MongoWaitQueueTimeoutError,
 * not exported: known by name), or for an operation with `timeoutMS` in STORE_URL. A 503 like any
 * store that cannot answer; found 2026-11-30, it was passed on as it was, a 500. Not a lost
 * connection: a pool may be full of slow work on a live server, which a probe would not clear.
 */
function isTimedOutWaiting(error: unknown): boolean {
  return (
    error instanceof mongodb().MongoOperationTimeoutError ||
    (error instanceof Error && error.name === 'MongoWaitQueueTimeoutError')
  );
}

function isConnectionLoss(error: unknown): boolean {
  const {
    MongoNetworkError,
    MongoServerSelectionError,
    MongoNotConnectedError,
    MongoTopologyClosedError,
    MongoClientClosedError,
  } = mongodb();
  return (
    isSystemError(error) ||
    [
      MongoNetworkError,
      MongoServerSelectionError,
      MongoNotConnectedError,
      MongoTopologyClosedError,
      MongoClientClosedError,
    ].some((type) => error instanceof type)
  );
}

/** Each collection write, however it ends, is told to the store's write listeners before its caller is answered. */
function tellWritesEnded(prototype: { wrote: () => void }, methods: string[]): void {
  wrapEach(prototype, methods, async (operation, self) => {
    try {
      return await operation();
    } finally {
      (self as { wrote: () => void }).wrote();
    }
  });
}

/** Replaces each named async method of `prototype` by `around`, given the original call (bound to its object and arguments) and the object. */
function wrapEach(
  prototype: object,
  methods: string[],
  around: (operation: () => Promise<unknown>, self: unknown) => Promise<unknown>,
): void {
  const target = prototype as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const name of methods) {
    const operation = target[name];
    if (!operation) throw new Error(`${name} is no method of the prototype it should wrap`);
    target[name] = function (this: unknown, ...args: unknown[]) {
      return around(() => operation.apply(this, args), this);
    };
  }
}

translateConnectionLoss(MongoStore.prototype, [
  'nextSequence',
  'addToWindow',
  'readWindows',
  'ping',
  'clock',
  'purgeExpired',
]);
translateConnectionLoss(MongoCollection.prototype, [
  'insert',
  'insertMany',
  'upsert',
  'get',
  'findOne',
  'find',
  'count',
  'update',
  'delete',
  'deleteMany',
  'deleteBefore',
]);
tellWritesEnded(MongoCollection.prototype, [
  'insert',
  'insertMany',
  'upsert',
  'update',
  'delete',
  'deleteMany',
  'deleteBefore',
]);

async function createIndexes(rows: Rows, spec: CollectionSpec, keys: RowKeys): Promise<void> {
  await createExpiryIndex(rows, '_expiresAtDate');
  for (const index of spec.indexes ?? []) {
    const fields = indexFields(index);
    await rows.createIndex(
      { tenant: 1, ...Object.fromEntries(fields.map((field) => [docPath(field), 1])) },
      {
        name: `ix_${fields.join('_')}`,
      },
    );
  }
  for (const key of spec.uniqueKeys ?? []) await createUniqueIndex(rows, key, keys);
}

/**
 * A TTL index lets MongoDB delete expired rows itself. FerretDB 1.x rejects TTL
 * indexes (NotImplemented); there a plain index serves purgeExpired, which must
 * then do all the deleting.
 */
async function createExpiryIndex(rows: Collection<Row> | Collection<CounterRow>, field: string): Promise<void> {
  try {
    await rows.createIndex({ [field]: 1 }, { name: 'expiry_ttl', expireAfterSeconds: 0 });
  } catch (error) {
    if (!(error instanceof mongodb().MongoServerError && error.code === NOT_IMPLEMENTED)) throw error;
    await rows.createIndex({ [field]: 1 }, { name: 'expiry' });
  }
}

function windowCountOf(row: { count: number; resetAt: Date }): WindowCount {
  return { count: row.count, resetAt: row.resetAt.getTime() };
}

/**
 * Unique per tenant, over the shadow values of the key's fields. Rows written
 * before this key was declared lack them and would all clash as null, so they
 * are filled in first (only while the index does not exist yet).
 */
async function createUniqueIndex(rows: Rows, key: string[], keys: RowKeys): Promise<void> {
  const name = `uq_${key.join('_')}`;
  if (await hasIndex(rows, name)) return;
  await backfillUniqueShadows(rows, key, keys);
  const fields = Object.fromEntries(key.map((field) => [`_unique.${field}`, 1 as const]));
  await rows.createIndex({ tenant: 1, ...fields }, { name, unique: true });
}

async function hasIndex(rows: Rows, name: string): Promise<boolean> {
  try {
    return (await rows.listIndexes().toArray()).some((index) => index.name === name);
  } catch (error) {
    if (error instanceof mongodb().MongoServerError && error.code === NAMESPACE_NOT_FOUND) return false;
    throw error;
  }
}

async function backfillUniqueShadows(rows: Rows, key: string[], keys: RowKeys): Promise<void> {
  const lacking = rows.find(
    { $or: key.map((field) => ({ [`_unique.${field}`]: { $exists: false } })) },
    { projection: { doc: 1 } },
  );
  for await (const row of lacking) {
    const shadows = Object.fromEntries(
      key.map((field) => [`_unique.${field}`, keys.uniqueShadow(row.doc[field], row._id)]),
    );
    await rows.updateOne({ _id: row._id }, { $set: shadows });
  }
}

/** The document in LAYOUT_COLLECTION that says how this database's rows are keyed. */
interface LayoutDoc {
  _id: string;
  separator: string;
  unsetPrefix: string;
}

/** Where a database says how its rows are keyed (RowKeys.of). */
const LAYOUT_COLLECTION = 'store_layout';
const ROW_KEYS_LAYOUT = 'row-keys';

/**
 * How a row's `_id` and its unique-key stand-ins are spelt. A row is `<tenant>/<id>`: no tenant id
 * holds a `/`, so the pair maps to one string. Databases written before this layout used U+0000
 * for both, which PostgreSQL's jsonb cannot hold (FerretDB over PostgreSQL answers "unsupported
 * Unicode escape sequence"); they keep it, since a MongoDB database that holds them holds NUL
 * anyway, and rewriting every row's immutable `_id` is a migration with nothing to gain. Which one
 * a database uses is decided once, when it is first opened by this version, and kept in
 * LAYOUT_COLLECTION, so that every node agrees.
 */
class RowKeys {
  private static readonly CURRENT = { separator: '/', unsetPrefix: '\u0001unset:' };
  private static readonly LEGACY = { separator: '\u0000', unsetPrefix: '\u0000unset:' };

  private constructor(
    private readonly separator: string,
    private readonly unsetPrefix: string,
  ) {}

  /** The database's layout: as recorded; else LEGACY for a database that already holds rows, CURRENT for a new one. */
  static async of(db: Db): Promise<RowKeys> {
    const layouts = db.collection<LayoutDoc>(LAYOUT_COLLECTION);
    let layout = await layouts.findOne({ _id: ROW_KEYS_LAYOUT });
    if (!layout) {
      const chosen = (await holdsRows(db)) ? RowKeys.LEGACY : RowKeys.CURRENT;
      // Nodes opening a new database at once: the first insert decides, the others read it.
      await layouts.insertOne({ _id: ROW_KEYS_LAYOUT, ...chosen }).catch((error: unknown) => {
        if (!isDuplicateKey(error)) throw error;
      });
      layout = await layouts.findOne({ _id: ROW_KEYS_LAYOUT });
    }
    if (!layout) throw new Error(`${LAYOUT_COLLECTION} lost its ${ROW_KEYS_LAYOUT} document`);
    return new RowKeys(layout.separator, layout.unsetPrefix);
  }

  rowId(tenant: string, id: string | number): string {
    return `${tenant}${this.separator}${idKey(id)}`;
  }

  /**
   * What the unique indexes see for one field of a unique key. A null or absent
   * value must exempt the row from the key, which a partial index would express,
   * but FerretDB 1.x rejects partialFilterExpression and ignores `sparse`. So an
   * unset value is replaced by a stand-in unique to the row, which cannot clash:
   * uniqueness stays enforced by the server, atomically, on both.
   */
  uniqueShadow(value: unknown, rowId: string): unknown {
    return isUnset(value) ? `${this.unsetPrefix}${rowId}` : value;
  }
}

/** True when some store collection of the database holds a row. */
async function holdsRows(db: Db): Promise<boolean> {
  const collections = await db.listCollections({}, { nameOnly: true }).toArray();
  for (const { name } of collections.filter((info) => info.name.startsWith(PHYSICAL_PREFIX))) {
    if (await db.collection(name).findOne({}, { projection: { _id: 1 } })) return true;
  }
  return false;
}

/** The $set/$unset for update(), or null when there is nothing to change. */
function changeOf(
  fields: Partial<StoredDoc>,
  rowId: string,
  uniqueFields: string[],
  keys: RowKeys,
): UpdateFilter<Row> | null {
  const set: Record<string, unknown> = {};
  const unset: Record<string, ''> = {};
  for (const [field, value] of Object.entries(fields)) {
    if (field === 'id') continue; // the row key is derived from the id: ids never change
    if (value === undefined) unset[docPath(field)] = '';
    else set[docPath(field)] = value;
    if (uniqueFields.includes(field)) set[`_unique.${field}`] = keys.uniqueShadow(value, rowId);
  }
  if ('expiresAt' in fields) {
    const expiry = expiryOf(fields);
    if (expiry === null) unset._expiresAtDate = '';
    else set._expiresAtDate = new Date(expiry);
  }
  const change = {
    ...(Object.keys(set).length > 0 && { $set: set }),
    ...(Object.keys(unset).length > 0 && { $unset: unset }),
  };
  return Object.keys(change).length > 0 ? (change as UpdateFilter<Row>) : null;
}

/** Equality on document fields; MongoDB's `{ field: null }` already matches absent or null. */
function docFilter(filter: Filter): MongoFilter<Row> {
  assertFilterValues(filter);
  return Object.fromEntries(
    Object.entries(filter).map(([field, value]) => [docPath(field), isUnset(value) ? null : value]),
  );
}

/** FindOptions.startAt: at most the bound when sorting down, at least it when up (MongoDB compares within a type only). */
function startAtFilter(options: FindOptions): MongoFilter<Row> {
  if (options.startAt === undefined || !options.sort) return {};
  const operator = options.sort.direction === 'desc' ? '$lte' : '$gte';
  return { [docPath(options.sort.field)]: { [operator]: options.startAt } } as MongoFilter<Row>;
}

/**
 * A substring search as a case-insensitive $regex of the text with every metacharacter escaped
 * (so `.*` or `(` are themselves, never a pattern); $regex matches string values only. No field: nothing matches.
 */
function searchFilter(search: TextSearch | undefined): MongoFilter<Row> {
  const searching = activeSearch(search);
  if (!searching) return {};
  const pattern = searching.text.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
  const anyField = searching.fields.map((field) => ({ [docPath(field)]: { $regex: pattern, $options: 'i' } }));
  // In $and: the expiry condition is the filter's own $or (see live).
  return { $and: [anyField.length ? { $or: anyField } : { _id: { $exists: false } }] };
}

/** `_id` breaks ties, so skip/limit pages are stable. */
function sortOf(sort: NonNullable<FindOptions['sort']>): Record<string, 1 | -1> {
  const direction = sort.direction === 'desc' ? -1 : 1;
  return { [docPath(sort.field)]: direction, _id: direction };
}

/** Field names are validated identifiers, so they cannot smuggle in a `$` operator or a deeper path. */
function docPath(field: string): string {
  assertFieldName(field);
  return `doc.${field}`;
}

async function deleteExpired(rows: Rows): Promise<number> {
  return (await rows.deleteMany({ _expiresAtDate: { $lte: new Date() } })).deletedCount;
}

/**
 * MongoDB reports every unique-index violation as 11000. FerretDB 1.x does so
 * for inserts only; on updates it passes its backend's error through as an
 * InternalError, recognisable by SQLite's message or PostgreSQL's SQLSTATE
 * (23505, unique_violation).
 */
function isDuplicateKey(error: unknown): boolean {
  if (!(error instanceof mongodb().MongoServerError)) return false;
  return (
    error.code === DUPLICATE_KEY ||
    (error.code === INTERNAL_ERROR &&
      (error.message.includes('UNIQUE constraint failed') || error.message.includes('(SQLSTATE 23505)')))
  );
}

/**
 * FerretDB answers `buildInfo` with its own version beside the MongoDB one it speaks for. Its 1.x
 * releases run a conditional update, a findAndModify and a delete by filter as a read and then a
 * separate write (docs/scaling.md, test/store/ferretdb-atomicity.test.ts): what the store relies
 * on for single use does not hold on it unless something in front of it serialises those writes.
 */
async function caveatsOf(client: MongoClient): Promise<string[]> {
  // A server that will not say (buildInfo refused to this user) is opened all the same, with nothing said.
  const info = await client
    .db('admin')
    .command({ buildInfo: 1 })
    .catch(() => ({}) as Record<string, unknown>);
  if (typeof info.ferretdbVersion !== 'string') return [];
  return [
    `the MongoDB-wire store is FerretDB ${info.ferretdbVersion}, which does not apply conditional updates atomically: a code, refresh token or other single-use record can be used twice by requests at the same moment unless a proxy in front of it serialises those writes (as the tests' does); use PostgreSQL for several processes (docs/scaling.md)`,
  ];
}
