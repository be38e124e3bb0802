import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import {
  ConflictError,
  DEFAULT_TENANT,
  type CollectionSpec,
  type Filter,
  type FindOptions,
  type Store,
  type StoredDoc,
  type TenantCollection,
} from '../../src/store/types.js';
import {
  DeclaredSpecs,
  PHYSICAL_PREFIX,
  assertFieldName,
  expiryOf,
  idKey,
  isUnset,
  matchesFilter,
  normalizeSpec,
  pageOf,
  physicalName,
} from '../shared/spec.js';

type Db = Database.Database;
type Params = Record<string, unknown>;
const NOT_EXPIRED = '(expires_at IS NULL OR expires_at > @now)';

/** Embedded default store: one SQLite file (WAL), one table per collection, documents as JSON. */
export class SqliteStore implements Store {
  private readonly declared = new DeclaredSpecs();

  private constructor(private readonly db: Db) {}

  static async open(location: string): Promise<SqliteStore> {
    const file = location === ':memory:' || location === '' ? ':memory:' : location;
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.pragma('synchronous = NORMAL');
    db.exec('CREATE TABLE IF NOT EXISTS sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL)');
    return new SqliteStore(db);
  }

  collection<T extends StoredDoc = StoredDoc>(specOrName: CollectionSpec | string, tenant = DEFAULT_TENANT): TenantCollection<T> {
    const spec = this.declare(normalizeSpec(specOrName));
    return new SqliteCollection<T>(this.db, spec, tenant);
  }

  /** Creates the table and indexes on first use, and again when a later declaration adds keys or indexes. */
  private declare(next: CollectionSpec): CollectionSpec {
    const { spec, grew } = this.declared.declare(next);
    if (grew) this.createTable(spec);
    return spec;
  }

  private createTable(spec: CollectionSpec): void {
    const table = physicalName(spec.name);
    this.db.exec(`CREATE TABLE IF NOT EXISTS ${quoted(table)} (
      tenant TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, expires_at INTEGER,
      PRIMARY KEY (tenant, id))`);
    this.db.exec(`CREATE INDEX IF NOT EXISTS ${quoted(`${table}_expiry`)} ON ${quoted(table)} (expires_at) WHERE expires_at IS NOT NULL`);
    for (const field of spec.indexes ?? []) this.createIndex(table, 'ix', [field]);
    // Unique keys are checked in code (null values must not clash); the index keeps that check fast.
    for (const key of spec.uniqueKeys ?? []) this.createIndex(table, 'uq', key);
  }

  private createIndex(table: string, kind: string, fields: string[]): void {
    const name = quoted(`${table}_${kind}_${fields.join('_')}`);
    this.db.exec(`CREATE INDEX IF NOT EXISTS ${name} ON ${quoted(table)} (tenant, ${fields.map(jsonField).join(', ')})`);
  }

  async nextSequence(name: string): Promise<number> {
    const row = this.db
      .prepare('INSERT INTO sequences (name, value) VALUES (?, 1) ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value')
      .get(name) as { value: number };
    return row.value;
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  /** Covers every collection table in the file, also those this process has not declared (yet). */
  async purgeExpired(): Promise<number> {
    const now = Date.now();
    let removed = 0;
    for (const table of this.collectionTables()) {
      removed += this.db.prepare(`DELETE FROM ${quoted(table)} WHERE expires_at <= ?`).run(now).changes;
    }
    return removed;
  }

  private collectionTables(): string[] {
    const rows = this.db
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '\\'`)
      .all(`${PHYSICAL_PREFIX.replaceAll('_', '\\_')}%`) as { name: string }[];
    return rows.map((row) => row.name);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

class SqliteCollection<T extends StoredDoc> implements TenantCollection<T> {
  private readonly table: string;

  constructor(
    private readonly db: Db,
    private readonly spec: CollectionSpec,
    readonly tenant: string,
  ) {
    this.table = quoted(physicalName(spec.name));
  }

  async insert(doc: T): Promise<T> {
    return this.write(doc, false);
  }

  async upsert(doc: T): Promise<T> {
    return this.write(doc, true);
  }

  async get(id: string | number): Promise<T | null> {
    return this.getSync(id);
  }

  async findOne(filter: Filter): Promise<T | null> {
    const [first] = await this.find(filter, { limit: 1 });
    return first ?? null;
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    const { skip, limit } = pageOf(options);
    if (limit === 0) return [];
    const { where, params } = this.where(filter);
    const sql = `SELECT doc FROM ${this.table} WHERE ${where} ${orderBy(options)} LIMIT ${limit ?? -1} OFFSET ${skip}`;
    const rows = this.db.prepare(sql).all(params) as { doc: string }[];
    return rows.map((row) => JSON.parse(row.doc) as T);
  }

  async count(filter: Filter = {}): Promise<number> {
    const { where, params } = this.where(filter);
    return (this.db.prepare(`SELECT COUNT(*) AS n FROM ${this.table} WHERE ${where}`).get(params) as { n: number }).n;
  }

  async update(id: string | number, fields: Partial<T>, onlyIf?: Filter): Promise<T | null> {
    // IMMEDIATE takes the write lock before reading, so the onlyIf check and the write are one atomic step.
    const apply = this.db.transaction((): T | null => {
      const current = this.getSync(id);
      if (!current || (onlyIf && !matchesFilter(current, onlyIf))) return null;
      const next = { ...current, ...fields, id: current.id } as T;
      this.assertUnique(next);
      this.db
        .prepare(`UPDATE ${this.table} SET doc = @doc, expires_at = @expiresAt WHERE tenant = @tenant AND id = @id`)
        .run({ doc: JSON.stringify(next), expiresAt: expiryOf(next), tenant: this.tenant, id: idKey(id) });
      return next;
    });
    return apply.immediate();
  }

  /** Also removes an expired (already invisible) document, and then reports true. */
  async delete(id: string | number): Promise<boolean> {
    return this.db.prepare(`DELETE FROM ${this.table} WHERE tenant = ? AND id = ?`).run(this.tenant, idKey(id)).changes > 0;
  }

  /** Also removes matching expired documents, and counts them. */
  async deleteMany(filter: Filter): Promise<number> {
    const { where, params } = this.where(filter, false);
    return this.db.prepare(`DELETE FROM ${this.table} WHERE ${where}`).run(params).changes;
  }

  private write(doc: T, replace: boolean): T {
    const run = this.db.transaction((): T => {
      if (!replace && this.getSync(doc.id)) throw new ConflictError(this.spec.name, ['id']);
      this.assertUnique(doc);
      // REPLACE also overwrites an expired row with this id, which must not block the insert.
      this.db
        .prepare(`INSERT OR REPLACE INTO ${this.table} (tenant, id, doc, expires_at) VALUES (@tenant, @id, @doc, @expiresAt)`)
        .run({ tenant: this.tenant, id: idKey(doc.id), doc: JSON.stringify(doc), expiresAt: expiryOf(doc) });
      return doc;
    });
    return run.immediate();
  }

  /** Expired documents do not hold on to their unique values. */
  private assertUnique(doc: T): void {
    for (const key of this.spec.uniqueKeys ?? []) {
      if (key.some((field) => isUnset(doc[field]))) continue;
      const filter = Object.fromEntries(key.map((field) => [field, doc[field] as Filter[string]]));
      const { where, params } = this.where(filter);
      const clash = this.db
        .prepare(`SELECT 1 FROM ${this.table} WHERE ${where} AND id <> @selfId LIMIT 1`)
        .get({ ...params, selfId: idKey(doc.id) });
      if (clash !== undefined) throw new ConflictError(this.spec.name, key);
    }
  }

  private getSync(id: string | number): T | null {
    const row = this.db
      .prepare(`SELECT doc FROM ${this.table} WHERE tenant = @tenant AND id = @id AND ${NOT_EXPIRED}`)
      .get({ tenant: this.tenant, id: idKey(id), now: Date.now() }) as { doc: string } | undefined;
    return row ? (JSON.parse(row.doc) as T) : null;
  }

  private where(filter: Filter, liveOnly = true): { where: string; params: Params } {
    const clauses = ['tenant = @tenant'];
    const params: Params = { tenant: this.tenant };
    if (liveOnly) {
      clauses.push(NOT_EXPIRED);
      params.now = Date.now();
    }
    Object.entries(filter).forEach(([field, value], index) => {
      clauses.push(fieldCondition(field, value, `f${index}`, params));
    });
    return { where: clauses.join(' AND '), params };
  }
}

/**
 * One equality condition. JSON booleans come out of json_extract as 1/0, so
 * booleans and numbers also check the JSON type: `true` must not match `1`
 * (it does not in MongoDB, nor in matchesFilter).
 */
function fieldCondition(field: string, value: Filter[string] | undefined, param: string, params: Params): string {
  const path = jsonPath(field);
  if (isUnset(value)) return `${jsonField(field)} IS NULL`;
  if (typeof value === 'boolean') return `json_type(doc, '${path}') = '${value}'`;
  params[param] = value;
  const equal = `${jsonField(field)} = @${param}`;
  return typeof value === 'number' ? `${equal} AND json_type(doc, '${path}') IN ('integer', 'real')` : equal;
}

/** rowid (insertion order) breaks ties, so skip/limit pages are stable. */
function orderBy(options: FindOptions): string {
  if (!options.sort) return 'ORDER BY rowid';
  const direction = options.sort.direction === 'desc' ? 'DESC' : 'ASC';
  return `ORDER BY ${jsonField(options.sort.field)} ${direction}, rowid ${direction}`;
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
