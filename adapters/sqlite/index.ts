import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import {
  ConflictError,
  DEFAULT_TENANT,
  isStoreUnavailable,
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
  asciiLower,
  PHYSICAL_PREFIX,
  assertFieldName,
  assertFilterValues,
  expiryOf,
  idKey,
  indexFields,
  isUnset,
  matchesFilter,
  normalizeSpec,
  pageOf,
  physicalName,
} from '../shared/spec.js';
import { WriteListeners } from '../shared/write-listeners.js';
import { Checkpointer, WAL_SIZE_LIMIT_BYTES, WRITER_CHECKPOINT_PAGES } from './checkpointer.js';
import { ScanThread } from './scans.js';
import { changeOf, identityOf, unwritableCode, type FileIdentity } from './files.js';
import { BatchWriter } from '../../src/store/batches.js';
import { EVENT_LOOP_PACE, inPacedSteps } from '../../src/store/paced.js';

type Db = Database.Database;
type Params = Record<string, unknown>;
const NOT_EXPIRED = '(expires_at IS NULL OR expires_at > @now)';

/** Reads look at the files at most this often; writes and ping() always do. */
const READ_RECHECK_MS = 250;

/**
 * SQLite result codes (better-sqlite3's `SqliteError.code`, extended codes included) that mean
 * the file cannot be used any more: I/O errors, read-only or immutable files, corruption,
 * a file that is not a database, a full disk. Anything else (constraint, misuse) is a bug.
 */
const UNUSABLE_FILE = /^SQLITE_(IOERR|READONLY|CORRUPT|NOTADB|CANTOPEN|FULL)(_|$)/;

/**
 * Prepared statements, made once per SQL text and reused: preparing on every call showed among
 * the top self-time frames of a /token profile. The SQL texts are the collections' query shapes
 * (no values), a bounded set; the cap is a guard, not an expected limit.
 */
class Statements {
  private readonly cache = new Map<string, Database.Statement>();

  constructor(private readonly db: Db) {}

  get(sql: string): Database.Statement {
    let statement = this.cache.get(sql);
    if (!statement) {
      if (this.cache.size >= 1000) this.cache.clear();
      statement = this.db.prepare(sql);
      this.cache.set(sql, statement);
    }
    return statement;
  }
}

/** Embedded default store: one SQLite file (WAL), one table per collection, documents as JSON. */
export class SqliteStore implements Store {
  private readonly declared = new DeclaredSpecs();
  /** What declaredAs merged already: by spec object (weakly), and by name. */
  private readonly declaredSpecs = new WeakMap<CollectionSpec, CollectionSpec>();
  private readonly declaredNames = new Map<string, CollectionSpec>();
  /** Declared collections whose table is still to be created (see createTable). */
  private readonly tablesToCreate = new Set<string>();
  private readonly statements: Statements;

  /**
   * Group commit: the inserts and upserts of one event-loop turn (every request that wrote in it)
   * share one transaction and one round of file checks, which cost far more than the rows (about
   * 100 µs for a lone upsert, 16 µs a row in a group of 16). Each write keeps its own savepoint,
   * so a conflict fails that write alone; each caller's promise settles once the transaction is
   * committed, so nothing is acknowledged before it is in the file.
   */
  private readonly group: BatchWriter<() => void, unknown>;
  private readonly io: GuardedIo;
  private readonly writeListeners = new WriteListeners();
  private readonly writeToListeners: { collections: readonly string[]; listener: () => void }[] = [];
  /** Collections written since the write listeners were last told (onWriteTo). */
  private readonly writtenSinceTold = new Set<string>();
  /** Writes to each collection through this store object (changesTo), counted as they are made. */
  private readonly changesHere = new Map<string, number>();
  /** Each collection's count in collection_changes (every process's writes), as last read; and the data_version it was read at. */
  private changesEverywhere = new Map<string, number>();
  private changesReadAt: number | null = null;
  /** Collections written in the group transaction under way: their row of collection_changes is counted up once, at its end. */
  private readonly changedInGroup = new Set<string>();
  /** Set by close: a paced purge under way stops at its next step. */
  private closing = false;

  private constructor(
    private readonly db: Db,
    files: StoreFiles | null,
    private readonly checkpointer: Checkpointer | null,
    lockWaitMs: number,
    /** Where searches read, off the event loop (a file in WAL mode; none: on the store's connection). */
    private readonly threads: { scans?: ScanThread } = {},
  ) {
    this.io = new GuardedIo(
      db,
      files,
      () => {
        this.writeListeners.tell();
        this.tellWritesTo();
        checkpointer?.written();
      },
      lockWaitMs,
    );
    this.statements = new Statements(db);
    const commitTogether = db.transaction((writes: (() => void)[]) => {
      const failures = writes.map(ownFailureOf);
      for (const collection of this.changedInGroup) this.countChange(collection);
      this.changedInGroup.clear();
      return failures;
    });
    this.group = new BatchWriter({
      write: async (writes) => this.io.write(() => commitTogether.immediate(writes)),
      maxItems: GROUP_COMMIT_MAX_WRITES,
      onFailure: () => {},
    });
  }

  /**
   * Opens (or creates) the database file at `location`. Its directory must exist unless
   * `createDirectory` says to make it: a mistyped or unmounted directory must stop the start, not
   * silently begin a fresh, empty database beside the real one. `lockWaitMs`: how long a write
   * waits for another connection's write lock (STORE_SQLITE_LOCK_WAIT_MS).
   */
  static async open(
    location: string,
    { createDirectory = false, lockWaitMs = DEFAULT_LOCK_WAIT_MS } = {},
  ): Promise<SqliteStore> {
    const file = location === ':memory:' || location === '' ? ':memory:' : location;
    if (file !== ':memory:') {
      openDirectory(dirname(resolve(file)), createDirectory);
      createPrivately(file);
    }
    const db = new Database(file);
    try {
      // Before the first table: a new file gives the pages of deleted rows back (see giveSpaceBack). No effect on an older file (see reclaimFreedSpace).
      db.pragma('auto_vacuum = INCREMENTAL');
      db.pragma('journal_mode = WAL');
      db.pragma(`busy_timeout = ${lockWaitMs}`);
      db.pragma('synchronous = NORMAL');
      // Deleted and rewritten documents (a PKCE verifier set to null, …) are zeroed, not left in the page's free space.
      db.pragma('secure_delete = FAST');
      db.exec('CREATE TABLE IF NOT EXISTS sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL)');
      db.exec(
        'CREATE TABLE IF NOT EXISTS window_counters (key TEXT PRIMARY KEY, count INTEGER NOT NULL, reset_at INTEGER NOT NULL)',
      );
      // purgeExpired deletes ended windows in steps: each step finds them through this index.
      db.exec('CREATE INDEX IF NOT EXISTS window_counters_reset ON window_counters (reset_at)');
      // Writes per collection, counted in each write's transaction, for the other processes on the file (changesTo).
      db.exec('CREATE TABLE IF NOT EXISTS collection_changes (name TEXT PRIMARY KEY, changes INTEGER NOT NULL)');
      if (file === ':memory:') return new SqliteStore(db, null, null, lockWaitMs);
      // The -wal and -shm files exist from here on, as long as this connection is open. SQLite
      // creates them with the database file's mode; ones left by an older release may be wider.
      for (const path of [file, `${file}-wal`, `${file}-shm`]) keepPrivate(path);
      const files = StoreFiles.record(resolve(file));
      if (!files.inWalMode) return new SqliteStore(db, files, null, lockWaitMs);
      db.pragma(`wal_autocheckpoint = ${WRITER_CHECKPOINT_PAGES}`);
      db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
      return new SqliteStore(db, files, new Checkpointer(resolve(file), files.identities), lockWaitMs, {
        scans: new ScanThread(resolve(file), lockWaitMs, sqliteFailure),
      });
    } catch (error) {
      db.close();
      throw error;
    }
  }

  collection<T extends StoredDoc = StoredDoc>(
    specOrName: CollectionSpec | string,
    tenant = DEFAULT_TENANT,
  ): TenantCollection<T> {
    const spec = this.declaredAs(specOrName);
    return new SqliteCollection<T>(
      this.db,
      this.statements,
      this.io,
      spec,
      tenant,
      {
        commitInGroup: (write) => this.commitInGroup(write),
        changed: (grouped) => this.changed(spec.name, grouped),
      },
      this.threads.scans ?? null,
    );
  }

  onWrite(listener: () => void): void {
    this.writeListeners.add(listener);
  }

  onWriteTo(collections: readonly string[], listener: () => void): void {
    this.writeToListeners.push({ collections, listener });
  }

  /** After a write has ended: the listeners of the collections written since the last time. */
  private tellWritesTo(): void {
    if (this.writtenSinceTold.size === 0) return;
    const told = this.writeToListeners.filter(({ collections }) =>
      collections.some((collection) => this.writtenSinceTold.has(collection)),
    );
    this.writtenSinceTold.clear();
    for (const { listener } of told) listener();
  }

  /**
   * Every write to the collection by this process is counted as it is made (before its writer is
   * answered), and in collection_changes in the write's own transaction; another process's
   * commits change the file's data_version, and only then is collection_changes read again.
   */
  changesTo(collection: string): number {
    const seen = this.io.read(() => this.statements.get('PRAGMA data_version').pluck().get() as number);
    if (seen !== this.changesReadAt) {
      const rows = this.io.read(
        () =>
          this.statements.get('SELECT name, changes FROM collection_changes').all() as {
            name: string;
            changes: number;
          }[],
      );
      this.changesEverywhere = new Map(rows.map((row) => [row.name, row.changes]));
      this.changesReadAt = seen;
    }
    return (this.changesHere.get(collection) ?? 0) + (this.changesEverywhere.get(collection) ?? 0);
  }

  /** A write to `collection` is being made, in a transaction under way (`grouped`: the group's, counted in the file at its end). */
  private changed(collection: string, grouped: boolean): void {
    this.changesHere.set(collection, (this.changesHere.get(collection) ?? 0) + 1);
    if (this.writeToListeners.length > 0) this.writtenSinceTold.add(collection);
    if (grouped) this.changedInGroup.add(collection);
    else this.countChange(collection);
  }

  private countChange(collection: string): void {
    this.statements
      .get(
        'INSERT INTO collection_changes (name, changes) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET changes = changes + 1',
      )
      .run(collection);
  }

  /** Runs `write` (a savepoint of its own) in the next group transaction; rejects with its own failure. */
  private async commitInGroup(write: () => void): Promise<void> {
    const failure = await this.group.add(write);
    if (failure !== undefined) throw failure;
  }

  /**
   * The collection's spec. The same spec object (or name) given again adds nothing: it is merged
   * once, not on every call (a request asks for several collections, one with five indexes).
   */
  private declaredAs(specOrName: CollectionSpec | string): CollectionSpec {
    const known =
      typeof specOrName === 'string' ? this.declaredNames.get(specOrName) : this.declaredSpecs.get(specOrName);
    if (known && !this.tablesToCreate.has(known.name)) return known;
    const spec = this.declare(normalizeSpec(specOrName));
    if (typeof specOrName === 'string') this.declaredNames.set(specOrName, spec);
    else this.declaredSpecs.set(specOrName, spec);
    return spec;
  }

  /** Creates the table and indexes on first use, and again when a later declaration adds keys or indexes. */
  private declare(next: CollectionSpec): CollectionSpec {
    const { spec, grew } = this.declared.declare(next);
    if (grew || this.tablesToCreate.has(spec.name)) this.createTable(spec);
    return spec;
  }

  /**
   * A table that could not be created (another connection held the write lock) is created at the
   * collection's next use: its declaration is recorded already, so it would not grow again, and
   * every later request would meet a missing table long after the store came back.
   */
  private createTable(spec: CollectionSpec): void {
    try {
      sqliteCall(() => this.createTableNow(spec));
      this.tablesToCreate.delete(spec.name);
    } catch (error) {
      this.tablesToCreate.add(spec.name);
      this.io.noteFailure(error);
      if (!isBusy(error)) throw error;
      // SQLite's busy handler waited the whole lock wait already: the request's other writes need not again.
      this.io.lockedForTheWholeWait();
      throw new StoreUnavailableError(
        `the store's database is locked by another connection, so the ${spec.name} table could not be created (${(error as Error).message}); nothing was written. Retry shortly.`,
      );
    }
  }

  private createTableNow(spec: CollectionSpec): void {
    const table = physicalName(spec.name);
    this.db.exec(`CREATE TABLE IF NOT EXISTS ${quoted(table)} (
      tenant TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, expires_at INTEGER,
      PRIMARY KEY (tenant, id))`);
    this.db.exec(
      `CREATE INDEX IF NOT EXISTS ${quoted(`${table}_expiry`)} ON ${quoted(table)} (expires_at) WHERE expires_at IS NOT NULL`,
    );
    for (const index of spec.indexes ?? []) this.createIndex(table, 'ix', indexFields(index), spec.sparseIndexes);
    // Unique keys are checked in code (null values must not clash); the index keeps that check fast.
    for (const key of spec.uniqueKeys ?? []) this.createIndex(table, 'uq', key);
  }

  /**
   * A sparse index (CollectionSpec.sparseIndexes) is partial: rows without the field are not in it.
   * It has a name of its own (`sx`), and the full index an earlier release made is dropped.
   */
  private createIndex(table: string, kind: string, fields: string[], sparse = false): void {
    const named = (of: string) => quoted(`${table}_${of}_${fields.join('_')}`);
    const columns = `(tenant, ${fields.map(jsonField).join(', ')})`;
    if (!sparse) {
      this.db.exec(`CREATE INDEX IF NOT EXISTS ${named(kind)} ON ${quoted(table)} ${columns}`);
      return;
    }
    const present = fields.map((field) => `${jsonField(field)} IS NOT NULL`).join(' AND ');
    this.db.exec(`CREATE INDEX IF NOT EXISTS ${named('sx')} ON ${quoted(table)} ${columns} WHERE ${present}`);
    this.db.exec(`DROP INDEX IF EXISTS ${named(kind)}`);
  }

  async nextSequence(name: string, count = 1): Promise<number> {
    return this.io.write(() => {
      const row = this.statements
        .get(
          'INSERT INTO sequences (name, value) VALUES (@name, @count) ON CONFLICT(name) DO UPDATE SET value = value + @count RETURNING value',
        )
        .get({ name, count }) as { value: number };
      return row.value;
    });
  }

  /**
   * One upsert: SQLite locks the file for the statement, so processes sharing the file (workers,
   * servers on one host) count together. Every expression of DO UPDATE sees the row as it was.
   */
  async addToWindow(key: string, windowMs: number, amount = 1): Promise<WindowCount> {
    const now = Date.now();
    return this.io.write(() => {
      const row = this.statements
        .get(
          `INSERT INTO window_counters (key, count, reset_at) VALUES (@key, @amount, @resetAt)
           ON CONFLICT(key) DO UPDATE SET
             count = CASE WHEN reset_at > @now THEN count + excluded.count ELSE excluded.count END,
             reset_at = CASE WHEN reset_at > @now THEN reset_at ELSE excluded.reset_at END
           RETURNING count, reset_at`,
        )
        .get({ key, amount, now, resetAt: now + windowMs }) as { count: number; reset_at: number };
      return { count: row.count, resetAt: row.reset_at };
    });
  }

  async readWindows(keys: readonly string[]): Promise<Map<string, WindowCount>> {
    if (keys.length === 0) return new Map();
    const rows = this.io.read(
      () =>
        this.statements
          .get(
            `SELECT key, count, reset_at FROM window_counters WHERE key IN (SELECT value FROM json_each(@keys)) AND reset_at > @now`,
          )
          .all({ keys: JSON.stringify(keys), now: Date.now() }) as { key: string; count: number; reset_at: number }[],
    );
    return new Map(rows.map((row) => [row.key, { count: row.count, resetAt: row.reset_at }]));
  }

  /** Rejects with StoreUnavailableError when the database file is gone, replaced or unwritable (see GuardedIo). */
  async ping(): Promise<void> {
    this.io.check();
    this.io.assertNoRecentFileFailure();
    this.io.read(() => this.db.prepare('SELECT 1').get());
  }

  /**
   * Covers every collection table in the file, also those this process has not declared (yet).
   * In paced steps (src/store/paced.ts): a million expired tokens must not stall the requests
   * for the seconds one DELETE of them all would take. Each step is a write of its own, through
   * the expiry index; the file then gives the freed pages back (see giveSpaceBack).
   */
  async purgeExpired(): Promise<number> {
    const now = Date.now();
    let removed = 0;
    for (const table of this.io.read(() => this.collectionTables())) {
      const sql = `DELETE FROM ${quoted(table)} WHERE rowid IN (SELECT rowid FROM ${quoted(table)} WHERE expires_at <= @now LIMIT @limit)`;
      removed += await this.deleteInSteps(sql, now);
    }
    // Ended windows too; they are not documents, and not counted.
    await this.deleteInSteps(
      'DELETE FROM window_counters WHERE rowid IN (SELECT rowid FROM window_counters WHERE reset_at <= @now LIMIT @limit)',
      now,
    );
    await this.giveSpaceBack();
    return removed;
  }

  private deleteInSteps(sql: string, now: number): Promise<number> {
    return inPacedSteps(
      async (limit) => (this.closing ? 0 : this.io.write(() => this.statements.get(sql).run({ now, limit }).changes)),
      EVENT_LOOP_PACE,
    );
  }

  /**
   * Returns the free pages of the file to the file system (PRAGMA incremental_vacuum), in paced
   * steps too: a file made or converted by this release has auto_vacuum=incremental (see open and
   * reclaimFreedSpace); in an older one that has not been converted it does nothing.
   */
  private async giveSpaceBack(): Promise<void> {
    const freePages = () => this.db.pragma('freelist_count', { simple: true }) as number;
    await inPacedSteps(
      async (limit) =>
        this.closing
          ? 0
          : this.io.write(() => {
              const before = freePages();
              this.db.exec(`PRAGMA incremental_vacuum(${limit})`);
              return before - freePages();
            }),
      { maxPerStep: VACUUM_PAGES_PER_STEP, stepBudgetMs: EVENT_LOOP_PACE.stepBudgetMs },
    );
  }

  /**
   * Makes a file written by an older release (auto_vacuum=none: it never shrinks) give freed pages
   * back from now on. That takes one VACUUM, which rewrites the whole file (it needs as much free
   * disk space again, and holds the file for the time of a copy): run by schema migration 3, at a
   * start or in `arbiter migrate`, before any request is served. Nothing to do for a file made by
   * this release, which is made so (see open).
   */
  async reclaimFreedSpace(): Promise<void> {
    if (this.db.pragma('auto_vacuum', { simple: true }) === AUTO_VACUUM_INCREMENTAL) return;
    await this.group.flush();
    await this.io.write(() => {
      this.db.pragma('auto_vacuum = INCREMENTAL');
      this.db.exec('VACUUM');
    });
  }

  private collectionTables(): string[] {
    const rows = this.db
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '\\'`)
      .all(`${PHYSICAL_PREFIX.replaceAll('_', '\\_')}%`) as { name: string }[];
    return rows.map((row) => row.name);
  }

  /**
   * Replaces the contents of the store file `target` with those of `backupFile`, through SQLite's
   * backup API (the target's WAL is honoured, not overwritten behind its back). The backup must be
   * an intact Arbiter store. Every server on the file must be stopped first: a running one would
   * go on with what it had read before.
   */
  static async restore(backupFile: string, target: string): Promise<void> {
    const source = new Database(backupFile, { readonly: true, fileMustExist: true });
    try {
      const integrity = source.pragma('integrity_check', { simple: true });
      if (integrity !== 'ok') throw new Error(`${backupFile} is damaged: ${String(integrity)}`);
      const arbiterTables = source.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sequences'");
      if (!arbiterTables.get()) throw new Error(`${backupFile} is not an Arbiter store`);
      mkdirSync(dirname(target), { recursive: true, mode: PRIVATE_DIRECTORY_MODE });
      refuseWhileInUse(target);
      createPrivately(target);
      await source.backup(target);
    } finally {
      source.close();
    }
  }

  /** One document of a backup file (`backup`'s output), read without changing it; null when absent. */
  static documentInBackup(backupFile: string, collection: string, tenant: string, id: string): unknown {
    const source = new Database(backupFile, { readonly: true, fileMustExist: true });
    try {
      const table = physicalName(collection);
      if (!source.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table)) return null;
      const row = source.prepare(`SELECT doc FROM ${quoted(table)} WHERE tenant = ? AND id = ?`).get(tenant, id) as
        { doc: string } | undefined;
      return row ? (JSON.parse(row.doc) as unknown) : null;
    } finally {
      source.close();
    }
  }

  /**
   * An online backup into `destination` (SQLite's backup API through better-sqlite3): a consistent
   * copy of the file while the server keeps answering, the WAL's committed pages included. The
   * file is made (or narrowed to) owner-only before a byte is copied into it.
   */
  async backup(destination: string): Promise<void> {
    await this.group.flush();
    createPrivately(destination);
    keepPrivate(destination);
    await this.db.backup(destination);
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.group.close();
    await this.checkpointer?.stop();
    await this.threads.scans?.stop();
    if (this.db.open) this.db.close();
  }
}

/**
 * A restore must not replace the pages under a running server: every connection to a WAL database
 * holds a lock on it while open, so an exclusive lock taken at once (no busy wait) says nobody has
 * it open. Released before the restore writes (the backup API opens the file itself).
 */
function refuseWhileInUse(file: string): void {
  if (!existsSync(file)) return;
  const probe = new Database(file, { fileMustExist: true });
  try {
    probe.pragma('busy_timeout = 0');
    probe.pragma('locking_mode = EXCLUSIVE');
    probe.exec('BEGIN EXCLUSIVE');
    probe.exec('COMMIT');
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_BUSY' || (error as { code?: string }).code === 'SQLITE_LOCKED')
      throw new Error(`${file} is in use by a running server or another process: stop it before restoring`, {
        cause: error,
      });
    throw error;
  } finally {
    probe.close();
  }
}

const GROUP_COMMIT_MAX_WRITES = 256;

/** PRAGMA auto_vacuum's value for INCREMENTAL. */
const AUTO_VACUUM_INCREMENTAL = 2;

/** Free pages (4 KiB each) returned to the file system per step: 4 MiB. */
const VACUUM_PAGES_PER_STEP = 1024;

/**
 * A write's own failure (a conflict: its savepoint is rolled back, the others go on), or
 * undefined once written. Any other error (the disk is full, the file is unusable) fails the
 * whole transaction and every write in it.
 */
function ownFailureOf(write: () => void): unknown {
  try {
    write();
    return undefined;
  } catch (error) {
    if (error instanceof ConflictError) return error;
    throw error;
  }
}

class SqliteCollection<T extends StoredDoc> implements TenantCollection<T> {
  private readonly table: string;
  /** The rows of one write, as one (nested) transaction: a savepoint inside the store's group transaction. Made at the first write (many collections only read) and reused. */
  private writeRows: Database.Transaction<(docs: readonly T[], replace: boolean) => void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly statements: Statements,
    private readonly io: GuardedIo,
    private readonly spec: CollectionSpec,
    readonly tenant: string,
    private readonly writes: {
      /** Runs a write in the store's group transaction. */
      commitInGroup: (write: () => void) => Promise<void>;
      /** Counts a write being made to this collection (Store.changesTo), in the transaction under way. */
      changed: (grouped: boolean) => void;
    },
    /** Where a search reads (ScanThread), or null: on the store's connection. */
    private readonly scans: ScanThread | null,
  ) {
    this.table = quoted(physicalName(spec.name));
  }

  async insert(doc: T): Promise<T> {
    await this.write([doc], false);
    return doc;
  }

  /** All of them or none, in the transaction of this turn's writes. */
  async insertMany(docs: readonly T[]): Promise<T[]> {
    if (docs.length > 0) await this.write(docs, false);
    return [...docs];
  }

  async upsert(doc: T): Promise<T> {
    await this.write([doc], true);
    return doc;
  }

  async get(id: string | number): Promise<T | null> {
    return this.io.read(() => this.getSync(id));
  }

  async getMany(ids: readonly (string | number)[]): Promise<T[]> {
    if (ids.length === 0) return [];
    const rows = this.io.read(
      () =>
        this.statements
          .get(
            `SELECT doc FROM ${this.table} WHERE tenant = @tenant AND id IN (SELECT value FROM json_each(@ids)) AND ${NOT_EXPIRED}`,
          )
          .all({ tenant: this.tenant, ids: JSON.stringify(ids.map(idKey)), now: Date.now() }) as { doc: string }[],
    );
    return rows.map((row) => JSON.parse(row.doc) as T);
  }

  async findOne(filter: Filter): Promise<T | null> {
    const [first] = await this.find(filter, { limit: 1 });
    return first ?? null;
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    const { skip, limit } = pageOf(options);
    if (limit === 0) return [];
    const { where, params } = this.where(filter, true, options.search);
    const bound = startAtCondition(options, params);
    const sql = `SELECT doc FROM ${this.table} WHERE ${where}${bound} ${orderBy(options)} LIMIT ${limit ?? -1} OFFSET ${skip}`;
    const scans = this.scansOf(options.search);
    const rows = scans
      ? await this.scanned(() => scans.all<{ doc: string }>(sql, params))
      : this.io.read(() => this.statements.get(sql).all(params) as { doc: string }[]);
    return rows.map((row) => JSON.parse(row.doc) as T);
  }

  async count(filter: Filter = {}, search?: TextSearch, atMost?: number): Promise<number> {
    const { where, params } = this.where(filter, true, search);
    const matching = `SELECT 1 FROM ${this.table} WHERE ${where}`;
    const sql = `SELECT COUNT(*) AS n FROM (${matching}${atMost === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(atMost))}`})`;
    const scans = this.scansOf(search);
    if (scans) return (await this.scanned(() => scans.get<{ n: number }>(sql, params))).n;
    return this.io.read(() => (this.statements.get(sql).get(params) as { n: number }).n);
  }

  /** A search reads every record of the tenant: it runs in the scan thread, where there is one. */
  private scansOf(search: TextSearch | undefined): ScanThread | null {
    return activeSearch(search) ? this.scans : null;
  }

  /** A read in the scan thread, after the checks every read of the store's file makes (GuardedIo.read). */
  private scanned<R>(read: () => Promise<R>): Promise<R> {
    this.io.read(() => undefined);
    return read();
  }

  async update(id: string | number, fields: Partial<T>, onlyIf?: Filter): Promise<T | null> {
    if (onlyIf) assertFilterValues(onlyIf);
    // IMMEDIATE takes the write lock before reading, so the onlyIf check and the write are one atomic step.
    const apply = this.db.transaction((): T | null => {
      const current = this.getSync(id);
      if (!current || (onlyIf && !matchesFilter(current, onlyIf))) return null;
      const next = { ...current, ...fields, id: current.id } as T;
      this.assertUnique(next);
      this.statements
        .get(`UPDATE ${this.table} SET doc = @doc, expires_at = @expiresAt WHERE tenant = @tenant AND id = @id`)
        .run({ doc: JSON.stringify(next), expiresAt: expiryOf(next), tenant: this.tenant, id: idKey(id) });
      this.writes.changed(false);
      return next;
    });
    return this.io.write(() => apply.immediate());
  }

  /** Also removes an expired (already invisible) document, and then reports true. */
  async delete(id: string | number): Promise<boolean> {
    const sql = `DELETE FROM ${this.table} WHERE tenant = @tenant AND id = @id`;
    return (await this.deleting(sql, { tenant: this.tenant, id: idKey(id) })) > 0;
  }

  /** Also removes matching expired documents, and counts them. */
  async deleteMany(filter: Filter, limit?: number, except?: Filter): Promise<number> {
    const matching = this.where(filter, false);
    const { params } = matching;
    // IS NOT 1: a field the exception names but the document lacks (NULL) does not keep it.
    const where = except ? `${matching.where} AND (${exceptionCondition(except, params)}) IS NOT 1` : matching.where;
    if (limit === undefined) return this.deleting(`DELETE FROM ${this.table} WHERE ${where}`, params);
    const step = `SELECT rowid FROM ${this.table} WHERE ${where}${limitClause(limit)}`;
    return this.deleting(`DELETE FROM ${this.table} WHERE rowid IN (${step})`, params);
  }

  /** Uses the collection's index on (tenant, field) when it declares one; json_type keeps other types out, as in MongoDB. */
  async deleteBefore(field: string, bound: string | number, limit?: number): Promise<number> {
    const type = typeof bound === 'number' ? "IN ('integer', 'real')" : "= 'text'";
    const matching = `tenant = @tenant AND ${jsonField(field)} < @bound AND json_type(doc, '${jsonPath(field)}') ${type}`;
    const sql = `DELETE FROM ${this.table} WHERE rowid IN (SELECT rowid FROM ${this.table} WHERE ${matching}${limitClause(limit)})`;
    return this.deleting(sql, { tenant: this.tenant, bound });
  }

  /** Runs a DELETE and counts it as a write to the collection (Store.changesTo) when it removed rows, in one transaction. */
  private deleting(sql: string, params: Params): Promise<number> {
    const apply = this.db.transaction((): number => {
      const { changes } = this.statements.get(sql).run(params);
      if (changes > 0) this.writes.changed(false);
      return changes;
    });
    return this.io.write(() => apply.immediate());
  }

  /**
   * In the store's group transaction. A write that could be left half done (several rows, or a row
   * whose unique keys are checked after it is written) is a savepoint (a nested better-sqlite3
   * transaction) of its own, rolled back alone when it fails; a single row with no unique key is
   * one statement, which fails whole or not at all, and needs none.
   */
  private write(docs: readonly T[], replace: boolean): Promise<void> {
    if (docs.length === 1 && !this.spec.uniqueKeys?.length)
      return this.writes.commitInGroup(() => this.writeRow(docs[0]!, replace));
    this.writeRows ??= this.db.transaction((rows: readonly T[], replaceRows: boolean) => {
      for (const doc of rows) this.writeRow(doc, replaceRows);
    });
    const writeRows = this.writeRows;
    return this.writes.commitInGroup(() => writeRows(docs, replace));
  }

  /**
   * One statement per row. An insert also takes the place of an expired row with its id, which must
   * not block it; a live one makes it change nothing, which is the id's conflict. The unique keys
   * are checked after it (a clash rolls the row back with its savepoint), so that a duplicate id is
   * still the conflict reported when both clash.
   */
  private writeRow(doc: T, replace: boolean): void {
    this.writes.changed(true);
    const row = { tenant: this.tenant, id: idKey(doc.id), doc: JSON.stringify(doc), expiresAt: expiryOf(doc) };
    if (replace) {
      this.statements
        .get(
          `INSERT OR REPLACE INTO ${this.table} (tenant, id, doc, expires_at) VALUES (@tenant, @id, @doc, @expiresAt)`,
        )
        .run(row);
    } else {
      const { changes } = this.statements
        .get(
          `INSERT INTO ${this.table} (tenant, id, doc, expires_at) VALUES (@tenant, @id, @doc, @expiresAt)
           ON CONFLICT (tenant, id) DO UPDATE SET doc = excluded.doc, expires_at = excluded.expires_at
           WHERE expires_at IS NOT NULL AND expires_at <= @now`,
        )
        .run({ ...row, now: Date.now() });
      if (changes === 0) throw new ConflictError(this.spec.name, ['id']);
    }
    this.assertUnique(doc);
  }

  /** Expired documents do not hold on to their unique values. */
  private assertUnique(doc: T): void {
    for (const key of this.spec.uniqueKeys ?? []) {
      if (key.some((field) => isUnset(doc[field]))) continue;
      const filter = Object.fromEntries(key.map((field) => [field, doc[field] as Filter[string]]));
      const { where, params } = this.where(filter);
      const clash = this.statements
        .get(`SELECT 1 FROM ${this.table} WHERE ${where} AND id <> @selfId LIMIT 1`)
        .get({ ...params, selfId: idKey(doc.id) });
      if (clash !== undefined) throw new ConflictError(this.spec.name, key);
    }
  }

  private getSync(id: string | number): T | null {
    const row = this.statements
      .get(`SELECT doc FROM ${this.table} WHERE tenant = @tenant AND id = @id AND ${NOT_EXPIRED}`)
      .get({ tenant: this.tenant, id: idKey(id), now: Date.now() }) as { doc: string } | undefined;
    return row ? (JSON.parse(row.doc) as T) : null;
  }

  private where(filter: Filter, liveOnly = true, search?: TextSearch): { where: string; params: Params } {
    const clauses = ['tenant = @tenant'];
    const params: Params = { tenant: this.tenant };
    if (liveOnly) {
      clauses.push(NOT_EXPIRED);
      params.now = Date.now();
    }
    assertFilterValues(filter);
    Object.entries(filter).forEach(([field, value], index) => {
      clauses.push(fieldCondition(field, value, `f${index}`, params));
    });
    const searching = activeSearch(search);
    if (searching) clauses.push(searchCondition(searching, params));
    return { where: clauses.join(' AND '), params };
  }
}

/**
 * The database file with its -wal and -shm companions, as they were when the store opened them.
 *
 * SQLite keeps using the files it has open. When the database file is deleted, renamed or
 * replaced while Arbiter runs, every write still succeeds, into a file nobody will open again,
 * and is lost at the next restart. So the store compares what the paths name now with what it
 * opened (device and inode).
 *
 * The -shm file (the WAL index) is memory-mapped, and readers write to it too: touching it after
 * it became immutable or read-only is a SIGBUS that kills the process without a word. So its
 * writability is checked before every statement (access(2) reports EPERM for an immutable file,
 * EROFS for a read-only file system), and that of the database and -wal files before every write.
 */
class StoreFiles {
  private constructor(private readonly files: FileIdentity[]) {}

  get identities(): readonly FileIdentity[] {
    return this.files;
  }

  /** The -wal and -shm files exist: SQLite could use WAL mode. */
  get inWalMode(): boolean {
    return this.files.length === 3;
  }

  static record(database: string): StoreFiles {
    const files: FileIdentity[] = [];
    for (const path of [database, `${database}-wal`, `${database}-shm`]) {
      const identity = identityOf(path);
      // No -wal/-shm when SQLite could not use WAL mode (e.g. a read-only directory): nothing to check then.
      if (identity) files.push(identity);
    }
    return new StoreFiles(files);
  }

  /** Throws StoreUnavailableError when a file is missing or is another file than the one opened. */
  assertSameFiles(): void {
    for (const file of this.files) {
      const change = changeOf(file);
      if (!change) continue;
      const what = change === 'replaced' ? 'was replaced by another file' : 'is missing (deleted or moved away)';
      const { path } = file;
      throw new StoreUnavailableError(
        `the store's database file ${path} ${what} while Arbiter is running; nothing is written any more. ` +
          'Put the original back, or restart Arbiter to open the file now at that path (after a deletion: a new, empty store).',
      );
    }
  }

  /** Throws StoreUnavailableError when the -shm file (`all`: any of the files) cannot be written. */
  assertWritable(all: boolean): void {
    for (const { path } of all ? this.files : this.files.filter((file) => file.path.endsWith('-shm'))) {
      const code = unwritableCode(path);
      if (code === null) continue;
      if (code === 'ENOENT') this.assertSameFiles();
      throw new StoreUnavailableError(
        `the store's database file ${path} cannot be written (${code}: an immutable file, a read-only file system or missing permissions); ` +
          'writes are refused until it is writable again.',
      );
    }
  }
}

/**
 * Every statement the store runs goes through here. A write is acknowledged only when the
 * files are still the ones opened: checked before (nothing written into a lost file, no
 * SIGBUS) and again after the commit (the file may have gone meanwhile). A read checks the
 * -shm file once per event-loop turn and the files' identity at most every READ_RECHECK_MS. SQLite's own
 * errors about an unusable file become StoreUnavailableError as well. A store in memory has
 * no files to check.
 */
class GuardedIo {
  private identityCheckedAt = Number.NEGATIVE_INFINITY;
  private shmCheckedThisTurn = false;
  /** The last statement that failed because SQLite could not use the file (assertNoRecentFileFailure). */
  private lastFileFailure: { at: number; reason: string } | null = null;
  /** When a write first found the write lock taken, since the last write that got it (see write). */
  private lockedSince: number | null = null;

  constructor(
    private readonly db: Db,
    private readonly files: StoreFiles | null,
    /** Told when a write has ended, committed or not (Store.onWrite). */
    private readonly afterWrite: () => void,
    /** How long a write waits for another connection's write lock. */
    private readonly lockWaitMs: number,
  ) {
    this.busyWait = `PRAGMA busy_timeout = ${lockWaitMs}`;
  }

  /** The busy handler's wait, set again after each write (see writeNow). */
  private readonly busyWait: string;

  /** Everything, as before a write. */
  check(): void {
    this.assertSameFiles();
    this.files?.assertWritable(true);
  }

  read<R>(statement: () => R): R {
    if (this.files) {
      if (Date.now() - this.identityCheckedAt >= READ_RECHECK_MS) this.assertSameFiles();
      if (!this.shmCheckedThisTurn) {
        this.files.assertWritable(false);
        // The reads of one event-loop turn (every request served in it) share one check.
        this.shmCheckedThisTurn = true;
        setImmediate(() => (this.shmCheckedThisTurn = false));
      }
    }
    try {
      return sqliteCall(statement);
    } catch (error) {
      this.noteFailure(error);
      throw error;
    }
  }

  /**
   * Several processes (WORKERS, or the command line) write one file, one transaction at a time.
   * SQLite's busy handler would wait for the write lock by sleeping, and a sleeping process
   * answers nothing meanwhile: instead a write that finds the lock taken gives the event loop
   * back and tries again shortly (after 0, 1, 2, 4, then every 8 ms), for up to `lockWaitMs`
   * as the busy handler would. Reads never wait for a writer (WAL) and keep the busy handler.
   * The wait is shared: writes that find the lock taken wait until `lockWaitMs` after the
   * first of them found it so, not each its own, so that a request making several writes (its
   * token, then its audit entry) is answered within that bound too.
   */
  async write<R>(statement: () => R): Promise<R> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        const result = this.writeNow(statement);
        this.lockedSince = null;
        return result;
      } catch (error) {
        this.noteFailure(error);
        if (!isBusy(error)) throw error;
        this.lockedSince ??= Date.now();
        if (Date.now() >= this.lockedSince + this.lockWaitMs)
          throw new StoreUnavailableError(
            `the store's database stayed locked by another connection for ${this.lockWaitMs / 1000} s (${(error as Error).message}); nothing was written. Retry shortly; if it lasts, look for a process holding a write transaction on the file.`,
          );
      }
      await sleep(attempt === 0 ? 0 : Math.min(2 ** (attempt - 1), 8));
    }
  }

  /**
   * A statement failed: SQLite's own "the file cannot be used" (full, an I/O error) keeps the ping
   * failing for a while (assertNoRecentFileFailure). The file checks' failures (missing,
   * replaced, unwritable) are not remembered: the ping makes those checks itself, each time.
   */
  noteFailure(error: unknown): void {
    if (isStoreUnavailable(error) && 'sqliteCode' in error)
      this.lastFileFailure = { at: Date.now(), reason: error.reason };
  }

  /**
   * Throws while a statement failed on the file within the last FILE_FAILURE_MEMORY_MS: a small
   * write, such as the readiness probe's, can still find room a larger one does not (found
   * 2026-11-29: the disk full, /readyz said the store was up while every token was refused).
   * Sustained failures keep it failing; once statements stop failing, it passes again.
   */
  assertNoRecentFileFailure(): void {
    const failure = this.lastFileFailure;
    if (failure && Date.now() - failure.at < FILE_FAILURE_MEMORY_MS)
      throw new StoreUnavailableError(
        `a statement failed on the file ${Date.now() - failure.at} ms ago: ${failure.reason}`,
      );
  }

  /** Another statement already waited the whole lock wait in vain: writes until one gets it share that wait. */
  lockedForTheWholeWait(): void {
    this.lockedSince ??= Date.now() - this.lockWaitMs;
  }

  private writeNow<R>(statement: () => R): R {
    try {
      this.check();
      // Set anew each time: SQLite applies a busy_timeout PRAGMA when it is prepared, not when a prepared one runs again.
      // exec, not pragma(): pragma() makes a JS statement and compiles a row function for its result every time.
      this.db.exec(NO_BUSY_WAIT);
      let result: R;
      try {
        result = sqliteCall(statement);
      } finally {
        this.db.exec(this.busyWait);
      }
      this.assertSameFiles();
      return result;
    } finally {
      this.afterWrite();
    }
  }

  private assertSameFiles(): void {
    this.files?.assertSameFiles();
    this.identityCheckedAt = Date.now();
  }
}

/** How long a statement that failed on the file keeps the store's ping failing (GuardedIo.assertNoRecentFileFailure). */
const FILE_FAILURE_MEMORY_MS = 5000;

/** How long a write waits for another process's write transaction by default; reads wait as long for a checkpoint or a recovery. */
const DEFAULT_LOCK_WAIT_MS = 5000;
const NO_BUSY_WAIT = 'PRAGMA busy_timeout = 0';

/** SQLITE_BUSY and its extended codes: another connection holds the lock this statement needs. */
function isBusy(error: unknown): boolean {
  return error instanceof Database.SqliteError && error.code.startsWith('SQLITE_BUSY');
}

/** Runs better-sqlite3 code; an error saying the file is unusable becomes StoreUnavailableError. */
function sqliteCall<R>(statement: () => R): R {
  try {
    return statement();
  } catch (error) {
    if (error instanceof Database.SqliteError) throw sqliteFailure(error.code, error.message, error);
    throw error;
  }
}

/** What the store throws for a SQLite error: a file it cannot use is a StoreUnavailableError (a 503). */
function sqliteFailure(code: string, message: string, error: Error = new Error(message)): Error {
  if (!UNUSABLE_FILE.test(code)) return error;
  return Object.assign(
    new StoreUnavailableError(
      `the store's database cannot be used (${code}: ${message}); nothing was written. Check the file and the disk, then restart Arbiter.`,
    ),
    { sqliteCode: code },
  );
}

/**
 * One equality condition. JSON booleans come out of json_extract as 1/0, so
 * booleans and numbers also check the JSON type: `true` must not match `1`
 * (it does not in MongoDB, nor in matchesFilter).
 */
/** DeleteMany's `except`: every field of it equal (its parameters named apart from the filter's). */
function exceptionCondition(except: Filter, params: Params): string {
  assertFilterValues(except);
  return Object.entries(except)
    .map(([field, value], index) => `(${fieldCondition(field, value, `except${index}`, params)})`)
    .join(' AND ');
}

function fieldCondition(field: string, value: Filter[string] | undefined, param: string, params: Params): string {
  const path = jsonPath(field);
  if (isUnset(value)) return `${jsonField(field)} IS NULL`;
  if (typeof value === 'boolean') return `json_type(doc, '${path}') = '${value}'`;
  params[param] = value;
  const equal = `${jsonField(field)} = @${param}`;
  return typeof value === 'number' ? `${equal} AND json_type(doc, '${path}') IN ('integer', 'real')` : equal;
}

/** FindOptions.startAt as a condition (with its leading AND): at most the bound when sorting down, at least it when up, of its type only. */
function startAtCondition(options: FindOptions, params: Params): string {
  if (options.startAt === undefined || !options.sort) return '';
  params.startAt = options.startAt;
  const type = typeof options.startAt === 'number' ? "IN ('integer', 'real')" : "= 'text'";
  const comparison = options.sort.direction === 'desc' ? '<=' : '>=';
  return ` AND ${jsonField(options.sort.field)} ${comparison} @startAt AND json_type(doc, '${jsonPath(options.sort.field)}') ${type}`;
}

/**
 * A substring search: instr() takes the text as it is (no LIKE wildcards, nothing to escape), both
 * sides lower-cased for ASCII letters only (SQLite's lower()); only string values match.
 */
function searchCondition(search: TextSearch, params: Params): string {
  params.search = asciiLower(search.text);
  const matches = search.fields.map(
    (field) => `(json_type(doc, '${jsonPath(field)}') = 'text' AND instr(lower(${jsonField(field)}), @search) > 0)`,
  );
  return matches.length === 0 ? '0' : `(${matches.join(' OR ')})`;
}

/** rowid (insertion order) breaks ties, so skip/limit pages are stable. */
function orderBy(options: FindOptions): string {
  if (!options.sort) return 'ORDER BY rowid';
  const direction = options.sort.direction === 'desc' ? 'DESC' : 'ASC';
  return `ORDER BY ${jsonField(options.sort.field)} ${direction}, rowid ${direction}`;
}

/** `LIMIT n` of a step of deletion, or nothing without a limit. */
function limitClause(limit: number | undefined): string {
  return limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(limit))}`;
}

/** Table and index names are validated identifiers; quoting keeps them from clashing with SQL keywords. */

function quoted(identifier: string): string {
  return `"${identifier}"`;
}

function jsonPath(field: string): string {
  assertFieldName(field);
  return `$.${field}`;
}

function jsonField(field: string): string {
  return `json_extract(doc, '${jsonPath(field)}')`;
}

/**
 * The store's files hold every record (Admin API key digests, sealed secrets, token digests): only
 * the owner may read them. SQLite gives its -wal, -shm and journal files the database file's mode.
 */
const PRIVATE_FILE_MODE = 0o600;
const PRIVATE_DIRECTORY_MODE = 0o700;

/** Creates `path` empty and owner-only when it does not exist (an empty file is an empty SQLite database). */
function createPrivately(path: string): void {
  try {
    closeSync(openSync(path, 'wx', PRIVATE_FILE_MODE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/**
 * Takes group and other access away from an existing store file (one an older release made 0644).
 * A file that is not this process's to change (another owner, a read-only mount) is left as it is.
 */
function keepPrivate(path: string): void {
  const stats = statSync(path, { throwIfNoEntry: false });
  if (!stats || (stats.mode & 0o077) === 0) return;
  try {
    chmodSync(path, stats.mode & PRIVATE_FILE_MODE);
  } catch (error) {
    if (!['EPERM', 'EROFS'].includes((error as NodeJS.ErrnoException).code ?? '')) throw error;
  }
}

/** The directory of the database file: made when allowed, else it must exist (an Error naming it otherwise). */
function openDirectory(directory: string, create: boolean): void {
  if (create) {
    mkdirSync(directory, { recursive: true, mode: PRIVATE_DIRECTORY_MODE });
    return;
  }
  let isDirectory = false;
  try {
    isDirectory = statSync(directory).isDirectory();
  } catch {
    // Missing: said below.
  }
  if (!isDirectory)
    throw new Error(
      `STORE_URL names a SQLite file in ${directory}, which is not an existing directory: create it (or correct STORE_URL); ` +
        'Arbiter makes no directory but its default data/, so that a mistyped path never starts an empty store',
    );
}
