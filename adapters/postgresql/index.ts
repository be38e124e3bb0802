import type pg from 'pg';
import { pgDriver } from './driver.js';
import {
  ConflictError,
  DEFAULT_TENANT,
  StoreUnavailableError,
  type CollectionSpec,
  type Filter,
  type FindOptions,
  type PoolState,
  type Store,
  type StoredDoc,
  type TenantCollection,
  type TextSearch,
  type WindowCount,
} from '../../src/store/types.js';
import {
  DeclaredSpecs,
  activeSearch,
  asciiLower,
  assertFieldName,
  assertFilterValues,
  expiryOf,
  idKey,
  normalizeSpec,
  pageOf,
  PHYSICAL_PREFIX,
  physicalName,
} from '../shared/spec.js';
import { isSystemError } from '../shared/system-errors.js';
import { Unresponsive } from '../shared/unresponsive.js';
import { WriteListeners } from '../shared/write-listeners.js';
import { documentInBackup, readBackup, writeBackup } from './backup.js';
import { PostgresSignals } from './signals.js';
import { type PostgresSettings, settingsOf } from './settings.js';
import { UPSERTED, UpsertBatches, type UpsertRow } from './upserts.js';

export { type PostgresSettings } from './settings.js';

type Params = unknown[];

/** SQLSTATE of a unique index violation. */
const UNIQUE_VIOLATION = '23505';

/**
 * SQLSTATE classes that say the server could not do the statement, through no fault of the caller's:
 * connection exceptions (08), a transaction rolled back by the server (40: serialization failure,
 * deadlock), insufficient resources (53: disk full, too many connections), operator intervention
 * (57: shutdown, a statement cancelled by statement_timeout), system errors (58).
 */
const SERVER_UNAVAILABLE = /^(08|40|53|57|58)/;

/** How long creating tables and indexes may wait for another node's (at start, or a collection's first use). */
const DDL_TIMEOUT_MS = 30_000;

/** Rows a purge deletes per statement, so that no statement holds locks and WAL for long. */
const PURGE_BATCH = 5000;

/** Upper-case ASCII letters and their lower-case forms: translate() folds those only, as SQLite's lower() does. */
const ASCII_UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const ASCII_LOWER = ASCII_UPPER.toLowerCase();

/** How much longer than statement_timeout the client awaits a statement. */
const SERVER_CANCEL_MARGIN_MS = 500;

/**
 * Scale-out store on PostgreSQL (`pg` and its pool). One table `c_<name>` per store collection:
 * the tenant, the id (text: `1` and `"1"` name one document) and the expiry as typed columns of
 * the primary key and an index, the document as `jsonb`, and an identity column for insertion
 * order (ties of a sort). Declared indexes are expression indexes on `(tenant, doc->'field')`;
 * unique keys are unique indexes on `(tenant, nullif(doc->'field', 'null'))`, whose NULLs never
 * clash, so that null or absent values exempt a document as the store interface says.
 *
 * Conditional updates, consumption and rotation are one `UPDATE … WHERE … RETURNING`; inserts are
 * one `INSERT … ON CONFLICT`; window counters and sequences one upsert each: atomic for every node.
 * Tables and indexes are created under an advisory lock, so that nodes starting together do not
 * race on the catalogue. Writes are announced to the other nodes with NOTIFY (PostgresSignals).
 */
export class PostgresStore implements Store {
  private readonly declared = new DeclaredSpecs();
  private readonly tablesReady = new Map<string, Promise<void>>();
  private closed = false;
  private readonly statementNames = new StatementNames();
  private readonly unresponsive = new Unresponsive('PostgreSQL', () => this.pool.query('SELECT 1'));
  /** The upserts of each table made meanwhile, one statement per batch (upserts.ts). */
  readonly upsertBatches = new UpsertBatches((text, values) => this.query(text, values), isConnectionFault);

  private constructor(
    readonly pool: pg.Pool,
    readonly settings: PostgresSettings,
    private readonly signals: PostgresSignals,
    /** Told of this store's writes, and of the changes other nodes announce. */
    private readonly writeListeners: WriteListeners,
  ) {}

  /**
   * `url`: a libpq-style `postgres://` or `postgresql://` URL; Arbiter's own settings among its
   * parameters (see settingsOf) are taken out before the rest goes to `pg`. The tables of the
   * `known` collections exist once this resolves.
   */
  static async open(url: string, known: readonly CollectionSpec[] = []): Promise<PostgresStore> {
    const settings = settingsOf(url);
    const pool = new (pgDriver().Pool)({
      connectionString: settings.connectionString,
      max: settings.poolSize,
      connectionTimeoutMillis: settings.connectTimeoutMs,
      // Client side: a frozen server (SIGSTOP, a stalled disk) answers nothing, and statement_timeout is the
      // server's own. A little later, so that a live server's cancel (a lock held elsewhere, say) comes first,
      // names its reason and keeps the connection: at the same moment the client gave up first about twice in three.
      query_timeout: settings.statementTimeoutMs + SERVER_CANCEL_MARGIN_MS,
      statement_timeout: settings.statementTimeoutMs,
      idle_in_transaction_session_timeout: settings.statementTimeoutMs * 2,
      ...(settings.schema && { options: `-c search_path=${settings.schema}` }),
      keepAlive: true,
      application_name: 'arbiter',
    });
    // An idle client whose connection breaks emits here; the pool drops it, and the next statement connects anew.
    pool.on('error', () => {});
    // A client in use whose connection breaks (the server ended it: shutdown, a timeout) fails its statement,
    // which says so; its own 'error' event must not be left unhandled, which would end the process.
    pool.on('connect', (client) => client.on('error', () => {}));
    const writeListeners = new WriteListeners();
    const signals = new PostgresSignals(settings, pool, () => writeListeners.tell());
    const store = new PostgresStore(pool, settings, signals, writeListeners);
    try {
      await store.call(() => store.prepareSchema());
      await Promise.all(known.map((spec) => store.tableOf(store.declared.declare(normalizeSpec(spec)).spec)));
    } catch (error) {
      await store.close();
      // At start the operator's first question is which setting: name it.
      if (error instanceof StoreUnavailableError) throw new Error(`STORE_URL: ${error.reason}`, { cause: error });
      throw error;
    }
    return store;
  }

  /** The schema (when the URL names one) and the tables that are no collection's. */
  private async prepareSchema(): Promise<void> {
    await this.underDdlLock(async (client) => {
      if (this.settings.schema) await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoted(this.settings.schema)}`);
      await client.query('CREATE TABLE IF NOT EXISTS sequences (name text PRIMARY KEY, value bigint NOT NULL)');
      await client.query(
        'CREATE TABLE IF NOT EXISTS window_counters (key text PRIMARY KEY, count bigint NOT NULL, reset_at bigint NOT NULL)',
      );
    });
  }

  collection<T extends StoredDoc = StoredDoc>(
    specOrName: CollectionSpec | string,
    tenant = DEFAULT_TENANT,
  ): TenantCollection<T> {
    const { spec, grew } = this.declared.declare(normalizeSpec(specOrName));
    if (grew) this.tablesReady.delete(spec.name);
    return new PostgresCollection<T>(this, spec, tenant);
  }

  onWrite(listener: () => void): void {
    this.writeListeners.add(listener);
  }

  /**
   * Calls `listener` after every write to one of `collections`, by this node or (within a round
   * trip, through NOTIFY) by another node on the same PostgreSQL: for what a node keeps longer
   * than a turn (the policy snapshot). Best effort: keep polling too.
   */
  watch(collections: readonly string[], listener: () => void): void {
    this.signals.watch(collections, listener);
  }

  /** A write has ended: this process's listeners are told before the writer is answered. */
  wrote(): void {
    this.writeListeners.tell();
  }

  /** A write to a watched collection has succeeded: the watchers of every node are told before the writer is answered. */
  async announce(collection: string): Promise<void> {
    if (this.signals.isWatched(collection)) await this.signals.announce(collection);
  }

  /** Resolves once the table of `spec` and its indexes exist (created at first use, and again when the spec grew). */
  tableOf(spec: CollectionSpec): Promise<void> {
    let ready = this.tablesReady.get(spec.name);
    if (!ready) {
      ready = this.call(() => this.createTable(spec));
      this.tablesReady.set(spec.name, ready);
      // A failed attempt is forgotten, so that the next operation tries again.
      ready.catch(() => {
        if (this.tablesReady.get(spec.name) === ready) this.tablesReady.delete(spec.name);
      });
    }
    return ready;
  }

  private async createTable(spec: CollectionSpec): Promise<void> {
    const table = physicalName(spec.name);
    await this.underDdlLock(async (client) => {
      await client.query(createTableStatement(table));
      await client.query(
        `CREATE INDEX IF NOT EXISTS ${quoted(indexName(table, 'expiry', []))} ON ${quoted(table)} (expires_at) WHERE expires_at IS NOT NULL`,
      );
      // An entry of several fields is one compound index in that order (CollectionSpec.indexes).
      for (const index of spec.indexes ?? []) {
        const fields = typeof index === 'string' ? [index] : index;
        const columns = fields.map((field) => `(${docField(field)})`).join(', ');
        await client.query(
          `CREATE INDEX IF NOT EXISTS ${quoted(indexName(table, 'ix', fields))} ON ${quoted(table)} (tenant, ${columns})`,
        );
      }
      for (const key of spec.uniqueKeys ?? []) {
        // Expired rows hold on to their values until purged: they must not stop the index from being made.
        await client.query(`DELETE FROM ${quoted(table)} WHERE expires_at <= $1`, [Date.now()]);
        await client.query(
          `CREATE UNIQUE INDEX IF NOT EXISTS ${quoted(indexName(table, 'uq', key))} ON ${quoted(table)} (tenant, ${key.map(uniqueField).join(', ')})`,
        );
      }
    });
  }

  /** DDL of nodes starting together, one at a time: concurrent CREATE … IF NOT EXISTS of one name can fail in the catalogue. */
  private async underDdlLock(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    await this.inTransaction(async (client) => {
      // Nodes starting together wait for each other's DDL: longer than a statement may take otherwise.
      await client.query(`SET LOCAL statement_timeout = ${DDL_TIMEOUT_MS}`);
      // query_timeout per query is pg's (client.js), missing from its types.
      await client.query({
        text: "SELECT pg_advisory_xact_lock(hashtext('arbiter store ddl'))",
        query_timeout: DDL_TIMEOUT_MS,
      } as pg.QueryConfig);
      await work(client);
    });
  }

  /** Runs `work` in a transaction on one connection of the pool; rolled back when it throws. */
  async inTransaction<R>(work: (client: pg.PoolClient) => Promise<R>): Promise<R> {
    const client = await this.pool.connect();
    let failure: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      failure = error as Error;
      // A connection that failed is dropped (release with the error), so no rollback is owed on it.
      if (!isConnectionFault(error)) await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release(failure && isConnectionFault(failure) ? failure : undefined);
    }
  }

  async nextSequence(name: string, count = 1): Promise<number> {
    return this.call(async () => {
      const { rows } = await this.query<{ value: string }>(
        `INSERT INTO sequences (name, value) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET value = sequences.value + excluded.value RETURNING value`,
        [name, count],
      );
      return Number(rows[0]!.value);
    });
  }

  /** One upsert, atomic for every node: every expression of DO UPDATE sees the row as it was. */
  async addToWindow(key: string, windowMs: number, amount = 1): Promise<WindowCount> {
    const now = Date.now();
    return this.call(async () => {
      const { rows } = await this.query<{ count: string; reset_at: string }>(
        `INSERT INTO window_counters AS w (key, count, reset_at) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET
           count = CASE WHEN w.reset_at > $4 THEN w.count + excluded.count ELSE excluded.count END,
           reset_at = CASE WHEN w.reset_at > $4 THEN w.reset_at ELSE excluded.reset_at END
         RETURNING count, reset_at`,
        [key, amount, now + windowMs, now],
      );
      return { count: Number(rows[0]!.count), resetAt: Number(rows[0]!.reset_at) };
    });
  }

  async readWindows(keys: readonly string[]): Promise<Map<string, WindowCount>> {
    if (keys.length === 0) return new Map();
    return this.call(async () => {
      const { rows } = await this.query<{ key: string; count: string; reset_at: string }>(
        'SELECT key, count, reset_at FROM window_counters WHERE key = ANY($1::text[]) AND reset_at > $2',
        [keys, Date.now()],
      );
      return new Map(rows.map((row) => [row.key, { count: Number(row.count), resetAt: Number(row.reset_at) }]));
    });
  }

  /** Answers, and is no read-only standby. */
  async ping(): Promise<void> {
    await this.call(async () => {
      const { rows } = await this.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby');
      if (rows[0]!.standby)
        throw new StoreUnavailableError(
          'STORE_URL names a PostgreSQL standby, which cannot be written: name the primary (or a proxy that follows it)',
        );
    });
  }

  /** The server's time: the reference the nodes' clocks are compared with (src/store/clock.ts). */
  async clock(): Promise<number> {
    return this.call(async () => {
      const { rows } = await this.query<{ now: number }>(
        'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now',
      );
      return Math.round(rows[0]!.now);
    });
  }

  /** Every collection table of the schema, also those this process has not declared, in batches of PURGE_BATCH rows. */
  async purgeExpired(): Promise<number> {
    return this.call(async () => {
      const now = Date.now();
      const { rows: tables } = await this.query<{ name: string }>(
        `SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() AND starts_with(tablename, $1)`,
        [PHYSICAL_PREFIX],
      );
      let removed = 0;
      for (const { name } of tables) {
        const table = quoted(name);
        removed += await deleteInBatches(
          this.pool,
          `DELETE FROM ${table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${table} WHERE expires_at <= $1 LIMIT ${PURGE_BATCH}))`,
          [now],
        );
      }
      // Ended windows too; they are not documents, and not counted.
      await deleteInBatches(
        this.pool,
        `DELETE FROM window_counters WHERE ctid = ANY(ARRAY(SELECT ctid FROM window_counters WHERE reset_at <= $1 LIMIT ${PURGE_BATCH}))`,
        [now],
      );
      return removed;
    });
  }

  /** Runs pg work; a connection fault becomes StoreUnavailableError (503), as with the other stores. */
  async call<R>(work: () => Promise<R>): Promise<R> {
    this.unresponsive.check();
    try {
      return await work();
    } catch (error) {
      if (!isConnectionFault(error)) throw error;
      // A fault the server answered (DatabaseError) says it is there: its statement timeout (a lock
      // held elsewhere, a slow query) is that statement's, not every caller's of this node.
      if (!(error instanceof pgDriver().DatabaseError)) this.unresponsive.noticed();
      throw new StoreUnavailableError(
        `the PostgreSQL store cannot be reached or did not answer in time (${(error as Error).message}); the operation failed or its outcome is unknown.`,
      );
    }
  }

  /**
   * One statement on a connection of the pool, as a named prepared statement: each connection
   * parses and describes a statement text once, then only binds and executes it (the texts are
   * the collections' query shapes, a bounded set; values are always parameters).
   */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values: Params = [],
  ): Promise<pg.QueryResult<R>> {
    return this.pool.query<R>({ name: this.statementNames.nameOf(text), text, values });
  }

  /**
   * A consistent copy of every Arbiter table of the schema into `destination` (JSON lines, made
   * owner-only), while the nodes keep serving: see backup.ts.
   */
  async backup(destination: string): Promise<void> {
    const client = await this.call(() => this.pool.connect());
    try {
      await this.call(() => writeBackup(client, destination));
    } finally {
      client.release();
    }
  }

  /**
   * Replaces every Arbiter table of the schema STORE_URL names with a backup's rows, in one
   * transaction. Every node must be stopped first: a running one would go on with what it had read.
   */
  /** One document of a backup file, read without restoring anything; null when absent. */
  static documentInBackup(backupFile: string, collection: string, tenant: string, id: string): Promise<unknown> {
    return documentInBackup(backupFile, collection, tenant, id);
  }

  static async restore(url: string, backupFile: string): Promise<void> {
    const store = await PostgresStore.open(url);
    try {
      const client = await store.call(() => store.pool.connect());
      try {
        await readBackup(client, backupFile, createTableStatement);
      } finally {
        client.release();
      }
    } finally {
      await store.close();
    }
  }

  /** The pool's connections, for /metrics: open, idle, and the statements waiting for one. */
  connections(): PoolState {
    return {
      open: this.pool.totalCount,
      idle: this.pool.idleCount,
      waiting: this.pool.waitingCount,
      max: this.settings.poolSize,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.upsertBatches.close();
    await this.signals.close();
    await this.pool.end();
  }
}

/** A short name per statement text, the same for every connection of the pool. */
class StatementNames {
  private readonly names = new Map<string, string>();

  nameOf(text: string): string {
    let name = this.names.get(text);
    if (!name) {
      name = `arbiter_${this.names.size + 1}`;
      this.names.set(text, name);
    }
    return name;
  }
}

async function deleteInBatches(pool: pg.Pool, sql: string, params: Params): Promise<number> {
  let removed = 0;
  for (;;) {
    const { rowCount } = await pool.query(sql, params);
    removed += rowCount ?? 0;
    if ((rowCount ?? 0) < PURGE_BATCH) return removed;
  }
}

class PostgresCollection<T extends StoredDoc> implements TenantCollection<T> {
  private readonly table: string;

  constructor(
    private readonly store: PostgresStore,
    private readonly spec: CollectionSpec,
    readonly tenant: string,
  ) {
    this.table = quoted(physicalName(spec.name));
  }

  insert(doc: T): Promise<T> {
    return this.write(async () => {
      await this.retryingExpiredClash(() => this.insertRows([doc]));
      return doc;
    });
  }

  /** All of them or none: one statement. */
  insertMany(docs: readonly T[]): Promise<T[]> {
    if (docs.length === 0) return Promise.resolve([]);
    return this.write(async () => {
      const ids = docs.map((doc) => idKey(doc.id));
      if (new Set(ids).size < ids.length) throw new ConflictError(this.spec.name, ['id']);
      await this.retryingExpiredClash(() => this.insertRows(docs));
      return [...docs];
    });
  }

  /**
   * One INSERT of every row, with no transaction around it: a statement stores all of its rows or
   * none. A lone row replaces an expired row holding its id in that same statement; a row whose id
   * a live document holds changes nothing and is not returned, which is the conflict. Several rows
   * are a plain INSERT, which fails on any clash (a unique-key violation, storing nothing); an
   * expired row behind it is then removed by retryingExpiredClash, which tries once more. (An
   * `ON CONFLICT … WHERE expired` on several rows would store the others when one clashes with a
   * live row, so it needed a transaction: BEGIN and COMMIT, two more round trips per audit batch.)
   */
  private async insertRows(docs: readonly T[]): Promise<void> {
    const params: Params = [this.tenant];
    const values = docs.map((doc) => {
      params.push(idKey(doc.id), jsonOf(doc), expiryOf(doc));
      const at = params.length;
      return `($1, $${at - 2}, $${at - 1}::jsonb, $${at})`;
    });
    if (docs.length > 1) {
      await this.store.query(
        `INSERT INTO ${this.table} (tenant, id, doc, expires_at) VALUES ${values.join(', ')}`,
        params,
      );
      return;
    }
    const { rowCount } = await this.store.query(
      `INSERT INTO ${this.table} AS t (tenant, id, doc, expires_at) VALUES ${values[0]}
       ON CONFLICT (tenant, id) DO UPDATE SET doc = excluded.doc, expires_at = excluded.expires_at
       WHERE t.expires_at IS NOT NULL AND t.expires_at <= $5 RETURNING 1`,
      [...params, Date.now()],
    );
    if (!rowCount) throw new ConflictError(this.spec.name, ['id']);
  }

  /**
   * Joins the upserts of this table made meanwhile (UpsertBatches): one statement, committed before
   * any of them is answered. A batch refused for one row's sake (a unique key) is tried row by row.
   */
  upsert(doc: T): Promise<T> {
    return this.write(async () => {
      const row = { tenant: this.tenant, id: idKey(doc.id), json: jsonOf(doc), expiresAt: expiryOf(doc) };
      const outcome = await this.store.upsertBatches.add(this.spec.name, row, () => this.upsertAlone(row));
      if (outcome !== UPSERTED) throw outcome.error;
      return doc;
    });
  }

  /** One row's upsert, as its own statement: when its batch failed for a reason that may be its own. */
  private upsertAlone(row: UpsertRow): Promise<unknown> {
    return this.retryingExpiredClash(() =>
      this.store.query(
        `INSERT INTO ${this.table} (tenant, id, doc, expires_at) VALUES ($1, $2, $3::jsonb, $4)
         ON CONFLICT (tenant, id) DO UPDATE SET doc = excluded.doc, expires_at = excluded.expires_at`,
        [row.tenant, row.id, row.json, row.expiresAt],
      ),
    );
  }

  async get(id: string | number): Promise<T | null> {
    return this.read(async () => {
      const { rows } = await this.store.query<{ doc: T }>(
        `SELECT doc FROM ${this.table} WHERE tenant = $1 AND id = $2 AND ${NOT_EXPIRED}`,
        [this.tenant, idKey(id), Date.now()],
      );
      return rows[0]?.doc ?? null;
    });
  }

  async getMany(ids: readonly (string | number)[]): Promise<T[]> {
    if (ids.length === 0) return [];
    return this.read(async () => {
      const { rows } = await this.store.query<{ doc: T }>(
        `SELECT doc FROM ${this.table} WHERE tenant = $1 AND id = ANY($2::text[]) AND ${NOT_EXPIRED}`,
        [this.tenant, ids.map(idKey), Date.now()],
      );
      return rows.map((row) => row.doc);
    });
  }

  async findOne(filter: Filter): Promise<T | null> {
    const [first] = await this.find(filter, { limit: 1 });
    return first ?? null;
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    const { skip, limit } = pageOf(options);
    if (limit === 0) return [];
    return this.read(async () => {
      const { where, params } = this.where(filter, options.search);
      const bound = startAtCondition(options, params);
      const page = `${limit === undefined ? '' : ` LIMIT ${limit}`}${skip > 0 ? ` OFFSET ${skip}` : ''}`;
      const { rows } = await this.store.query<{ doc: T }>(
        `SELECT doc FROM ${this.table} WHERE ${where}${bound} ${orderBy(options)}${page}`,
        params,
      );
      return rows.map((row) => row.doc);
    });
  }

  /** With `atMost`, counting stops there (a page's capped count reads at most that many rows). */
  async count(filter: Filter = {}, search?: TextSearch, atMost?: number): Promise<number> {
    return this.read(async () => {
      const { where, params } = this.where(filter, search);
      const capped = atMost === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(atMost))}`;
      const { rows } = await this.store.query<{ n: string }>(
        `SELECT count(*) AS n FROM (SELECT 1 FROM ${this.table} WHERE ${where}${capped}) AS matched`,
        params,
      );
      return Number(rows[0]!.n);
    });
  }

  /**
   * One UPDATE whose WHERE carries `onlyIf`: PostgreSQL checks and writes atomically (a concurrent
   * writer of the row waits, then finds it no longer matching). Fields set to undefined are removed,
   * as JSON leaves them out; the id never changes.
   */
  update(id: string | number, fields: Partial<T>, onlyIf: Filter = {}): Promise<T | null> {
    return this.write(async () => {
      const set: Record<string, unknown> = {};
      const removed: string[] = [];
      for (const [field, value] of Object.entries(fields)) {
        if (field === 'id') continue;
        assertFieldName(field);
        if (value === undefined) removed.push(field);
        else set[field] = value;
      }
      const params: Params = [this.tenant, idKey(id), Date.now(), jsonOf(set), removed];
      const expiry = 'expiresAt' in fields ? `$${params.push(expiryOf(fields))}::bigint` : 'expires_at';
      const conditions = Object.entries(onlyIf).map(([field, value]) => fieldCondition(field, value, params));
      const sql = `UPDATE ${this.table} SET doc = (doc || $4::jsonb) - $5::text[], expires_at = ${expiry}
        WHERE tenant = $1 AND id = $2 AND ${NOT_EXPIRED}${conditions.map((condition) => ` AND ${condition}`).join('')}
        RETURNING doc`;
      const result = await this.retryingExpiredClash(() => this.store.query<{ doc: T }>(sql, params));
      return result.rows[0]?.doc ?? null;
    });
  }

  /** Also removes an expired (already invisible) document, and then reports true, like the other stores. */
  delete(id: string | number): Promise<boolean> {
    return this.write(async () => {
      const { rowCount } = await this.store.query(`DELETE FROM ${this.table} WHERE tenant = $1 AND id = $2`, [
        this.tenant,
        idKey(id),
      ]);
      return (rowCount ?? 0) > 0;
    });
  }

  /** Also removes matching expired documents, and counts them, like the other stores. */
  deleteMany(filter: Filter, limit?: number, except?: Filter): Promise<number> {
    return this.write(async () => {
      const params: Params = [this.tenant];
      const conditions = Object.entries(filter).map(([field, value]) => fieldCondition(field, value, params));
      // IS NOT TRUE: a field the exception names but the row lacks (NULL) does not keep it.
      if (except) {
        assertFilterValues(except);
        const kept = Object.entries(except).map(([field, value]) => `(${fieldCondition(field, value, params)})`);
        conditions.push(`(${kept.join(' AND ')}) IS NOT TRUE`);
      }
      const matching = `tenant = $1${conditions.map((condition) => ` AND ${condition}`).join('')}`;
      const { rowCount } = await this.store.query(this.deleting(matching, limit), params);
      return rowCount ?? 0;
    });
  }

  /**
   * The DELETE of the rows `matching` (`tenant = $1` first), at most `limit` of them when it is
   * given, named by their key: a row another transaction updates meanwhile moves to another ctid,
   * which a step that named rows by ctid skipped (found 2026-11-29: a sweep of a user's tokens
   * then ended with 2,001 of 3,000 left).
   */
  private deleting(matching: string, limit: number | undefined): string {
    if (limit === undefined) return `DELETE FROM ${this.table} WHERE ${matching}`;
    const step = Math.max(0, Math.floor(limit));
    return `DELETE FROM ${this.table} WHERE tenant = $1 AND id = ANY(ARRAY(SELECT id FROM ${this.table} WHERE ${matching} LIMIT ${step}))`;
  }

  /** jsonb compares within one type only here (the type is checked), as the other stores do; served by an index on (tenant, field). */
  deleteBefore(field: string, bound: string | number, limit?: number): Promise<number> {
    return this.write(async () => {
      const type = typeof bound === 'number' ? 'number' : 'string';
      const matching = `tenant = $1 AND ${docField(field)} < $2::jsonb AND jsonb_typeof(${docField(field)}) = '${type}'`;
      const params: Params = [this.tenant, JSON.stringify(bound)];
      const { rowCount } = await this.store.query(this.deleting(matching, limit), params);
      return rowCount ?? 0;
    });
  }

  /** A read, once the table exists; connection faults become StoreUnavailableError. */
  private async read<R>(work: () => Promise<R>): Promise<R> {
    await this.store.tableOf(this.spec);
    return this.store.call(work);
  }

  /** A write: as a read, and told to the write listeners however it ends, before its caller is answered. */
  private async write<R>(work: () => Promise<R>): Promise<R> {
    let result: R;
    try {
      result = await this.read(work);
    } finally {
      this.store.wrote();
    }
    await this.store.announce(this.spec.name);
    return result;
  }

  /**
   * Runs a write; a unique-key violation may come from an expired row that still holds the value
   * (expired rows are invisible but not yet purged), so this tenant's expired rows are deleted and
   * the write is tried once more before it counts as a conflict, on the key the index names.
   */
  private async retryingExpiredClash<R>(write: () => Promise<R>): Promise<R> {
    try {
      return await write();
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
    }
    await this.store.query(`DELETE FROM ${this.table} WHERE tenant = $1 AND expires_at <= $2`, [
      this.tenant,
      Date.now(),
    ]);
    try {
      return await write();
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw new ConflictError(this.spec.name, this.keyOfIndex((error as pg.DatabaseError).constraint));
    }
  }

  /** The unique key whose index a violation names; the id for the primary key. */
  private keyOfIndex(index: string | undefined): string[] {
    const table = physicalName(this.spec.name);
    return (this.spec.uniqueKeys ?? []).find((key) => indexName(table, 'uq', key) === index) ?? ['id'];
  }

  private where(filter: Filter, search?: TextSearch): { where: string; params: Params } {
    const params: Params = [this.tenant, Date.now()];
    const clauses = ['tenant = $1', notExpired(2)];
    for (const [field, value] of Object.entries(filter)) clauses.push(fieldCondition(field, value, params));
    const searching = activeSearch(search);
    if (searching) clauses.push(searchCondition(searching, params));
    return { where: clauses.join(' AND '), params };
  }
}

/** Live rows, with the current time as the third parameter. */
const NOT_EXPIRED = notExpired(3);

/** Live rows, with the current time as parameter `at`. */
function notExpired(at: number): string {
  return `(expires_at IS NULL OR expires_at > $${at})`;
}

/**
 * One equality condition, its value as a parameter. jsonb equality keeps types apart (`true` is not
 * `1`, `"1"` is not `1`), as MongoDB and the SQLite store do; `null` matches a JSON null or no field.
 */
function fieldCondition(field: string, value: Filter[string] | undefined, params: Params): string {
  assertFilterValues({ [field]: value ?? null });
  if (value === null || value === undefined)
    return `(${docField(field)} IS NULL OR ${docField(field)} = 'null'::jsonb)`;
  return `${docField(field)} = $${params.push(JSON.stringify(value))}::jsonb`;
}

/** FindOptions.startAt: at most the bound when sorting down, at least it when up, of its type only. */
function startAtCondition(options: FindOptions, params: Params): string {
  if (options.startAt === undefined || !options.sort) return '';
  const field = docField(options.sort.field);
  const comparison = options.sort.direction === 'desc' ? '<=' : '>=';
  const type = typeof options.startAt === 'number' ? 'number' : 'string';
  return ` AND ${field} ${comparison} $${params.push(JSON.stringify(options.startAt))}::jsonb AND jsonb_typeof(${field}) = '${type}'`;
}

/** A substring search: strpos takes the text as it is (no pattern characters), ASCII letters folded on both sides; strings only. */
function searchCondition(search: TextSearch, params: Params): string {
  if (search.fields.length === 0) return 'false';
  const text = `$${params.push(asciiLower(search.text))}`;
  const matches = search.fields.map(
    (field) =>
      `(jsonb_typeof(${docField(field)}) = 'string' AND strpos(translate(doc->>'${field}', '${ASCII_UPPER}', '${ASCII_LOWER}'), ${text}) > 0)`,
  );
  return `(${matches.join(' OR ')})`;
}

/** Insertion order (seq) breaks ties, so skip/limit pages are stable. */
function orderBy(options: FindOptions): string {
  if (!options.sort) return 'ORDER BY seq';
  const direction = options.sort.direction === 'desc' ? 'DESC' : 'ASC';
  // Absent values first going up, as SQLite and MongoDB sort them; a bound (startAt) leaves none out.
  const nulls = options.startAt !== undefined ? '' : direction === 'ASC' ? ' NULLS FIRST' : ' NULLS LAST';
  // `id` is unique: no tie to break. So an index of (…, id) gives a bounded page in its own order,
  // where the order of its nulls and `seq` made each page sort every row matched (found
  // 2026-11-29: a logout's pages over a user's 100,000 artefacts took 4.9 s).
  const ties = options.sort.field === 'id' ? '' : `, seq ${direction}`;
  return `ORDER BY ${docField(options.sort.field)} ${direction}${nulls}${ties}`;
}

/** A validated field of the document, as jsonb (what the expression indexes are made on). */
function docField(field: string): string {
  assertFieldName(field);
  return `(doc->'${field}')`;
}

/** A unique-key field as its index sees it: a JSON null as SQL NULL, which never clashes. */
function uniqueField(field: string): string {
  return `(nullif(${docField(field)}, 'null'::jsonb))`;
}

/** A collection's table: the typed columns Arbiter queries by, the document as jsonb, insertion order for ties. */
function createTableStatement(table: string): string {
  return `CREATE TABLE IF NOT EXISTS ${quoted(table)} (
    tenant text NOT NULL, id text NOT NULL, doc jsonb NOT NULL, expires_at bigint,
    seq bigint GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (tenant, id))`;
}

/** PostgreSQL cuts identifiers at 63 bytes; names are ASCII, so the same cut here matches what a violation reports. */
function indexName(table: string, kind: string, fields: string[]): string {
  return [table, kind, ...fields].join('_').slice(0, 63);
}

/** Table, schema and index names are validated identifiers; quoting keeps them from clashing with SQL keywords. */
function quoted(identifier: string): string {
  return `"${identifier}"`;
}

/**
 * The document as jsonb text. PostgreSQL's jsonb cannot hold U+0000 (the edge refuses it with a
 * 400 first: src/http); a value that slipped through is a caller's bug, said plainly here.
 */
function jsonOf(value: unknown): string {
  const json = JSON.stringify(value);
  if (json.includes('\\u0000')) throw new TypeError('a stored value holds U+0000, which PostgreSQL cannot store');
  return json;
}

function isUniqueViolation(error: unknown): boolean {
  return error instanceof pgDriver().DatabaseError && error.code === UNIQUE_VIOLATION;
}

/**
 * The server is gone, frozen or refusing: no answer in time (the pool's connect timeout, the
 * client's query timeout), a broken or refused connection, or an error of a SERVER_UNAVAILABLE class.
 */
function isConnectionFault(error: unknown): boolean {
  // 08P01 (protocol violation) is a statement this adapter got wrong, not a lost connection.
  if (error instanceof pgDriver().DatabaseError)
    return SERVER_UNAVAILABLE.test(error.code ?? '') && error.code !== '08P01';
  if (!(error instanceof Error)) return false;
  return isSystemError(error) || /timeout|terminated|Connection|connect|closed|ended/i.test(error.message);
}
