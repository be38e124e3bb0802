import { STORE_UNAVAILABLE_FOR_CALLERS, UnavailableToProvider } from '../http/errors.js';

/**
 * The one small storage interface every Arbiter component uses.
 *
 * A store holds named collections of JSON documents. Every document belongs to a
 * tenant (`DEFAULT_TENANT` when the request named none); every operation of a
 * `TenantCollection` is confined to one tenant, so tenant isolation cannot be
 * forgotten by a caller. Implementations: adapters/sqlite (embedded default),
 * adapters/postgresql (several nodes) and adapters/mongodb; each must pass test/store/conformance.ts.
 */

/** The tenant of every record created without an explicit tenant. */
export const DEFAULT_TENANT = '_default';

/**
 * A stored document. `id` is the primary key within its collection and tenant;
 * numeric ids (Admin API objects, audit entries) keep their type so that sorting by id is numeric.
 */
export interface StoredDoc {
  id: string | number;
  [field: string]: unknown;
}

export interface CollectionSpec {
  name: string;
  /**
   * Each entry is a list of fields whose combined values must be unique within
   * a tenant. A document whose value for any of those fields is null/absent is
   * not checked against that key.
   */
  uniqueKeys?: string[][];
  /**
   * Fields that are often used in filters and deserve an index. A list of fields is one compound
   * index, in that order: equality filters on the first ones, then a sort (and FindOptions.startAt)
   * on the last, read a page without sorting or counting what precedes it.
   */
  indexes?: (string | string[])[];
  /**
   * The indexed fields are absent from most documents (a token has no interaction uid, a machine
   * token no user): a store may leave documents without the field out of its indexes (SQLite makes
   * them partial), so that they cost nothing there. A filter by a value still uses them; one for
   * `null` (absent) does not.
   */
  sparseIndexes?: boolean;
}

/** Equality filter on top-level fields; `null` matches absent or null. */
export type Filter = Record<string, string | number | boolean | null>;

/**
 * A case-insensitive substring search: a document matches when the string value of one of
 * `fields` contains `text` (letters compared without case, ASCII at least; every other character,
 * `%`, `_`, `.`, `*` and the like included, as itself). Documents whose fields hold no string do
 * not match. Empty text matches every document. Unindexed: each search reads the tenant's
 * documents of the collection, so callers bound the text and page the answer.
 */
export interface TextSearch {
  fields: string[];
  text: string;
}

export interface FindOptions {
  /** Field to sort by; `id` and `createdAt` always work. */
  sort?: { field: string; direction: 'asc' | 'desc' };
  /**
   * With `sort`: only the documents whose sort field is at this value or beyond it in the sort's
   * direction (at most it for `desc`, at least it for `asc`), of its type (a string bound: strings;
   * a number: numbers). Keyset paging over a large collection: the next page starts at the last
   * value of this one (with `skip` the documents of that value already seen), so that a page costs
   * the same however deep it is, where `skip` alone walks every document before it. Use an indexed field.
   */
  startAt?: string | number;
  skip?: number;
  limit?: number;
  /** Only the documents that also match this search. */
  search?: TextSearch;
}

export interface TenantCollection<T extends StoredDoc = StoredDoc> {
  readonly tenant: string;
  /**
   * Inserts a new document. `expiresAt` (epoch milliseconds), when present, makes
   * the document invisible to every read after that instant and purgeable.
   * Throws ConflictError on a duplicate id or unique key.
   */
  insert(doc: T): Promise<T>;
  /**
   * Inserts the documents in their order, as one write: each as `insert` would, in one
   * transaction on SQLite (all or none), one ordered bulk insert on MongoDB. On a ConflictError
   * (duplicate id or unique key, also between two of the documents) the clashing document and
   * those after it are not stored; those before it are on MongoDB, not on SQLite.
   */
  insertMany(docs: readonly T[]): Promise<T[]>;
  /** Inserts or fully replaces the document with this id. Throws ConflictError on a unique-key clash with another document. */
  upsert(doc: T): Promise<T>;
  get(id: string | number): Promise<T | null>;
  /**
   * The live documents with these ids, in one read (one statement, one round trip), in no
   * particular order; unknown and expired ids are left out. For callers that would otherwise `get`
   * several ids at once (oidc-provider looks a presented token up under three models).
   */
  getMany(ids: readonly (string | number)[]): Promise<T[]>;
  findOne(filter: Filter): Promise<T | null>;
  find(filter?: Filter, options?: FindOptions): Promise<T[]>;
  /**
   * How many documents match the filter (and `search`, when given). With `atMost`, counting may stop
   * there (the answer is then at most `atMost`): a count of a large collection costs a read of
   * every match, so a page's "10,000+" need not read a million.
   */
  count(filter?: Filter, search?: TextSearch, atMost?: number): Promise<number>;
  /**
   * Sets the given top-level fields on the document with this id, atomically and
   * only if it currently matches `onlyIf` (when given). Returns the updated
   * document, or null when no (matching) document exists. This is the primitive
   * behind single-use codes and refresh-token rotation.
   */
  update(id: string | number, fields: Partial<T>, onlyIf?: Filter): Promise<T | null>;
  /** Returns true when a document was deleted. */
  delete(id: string | number): Promise<boolean>;
  /**
   * Deletes every document matching the filter; returns how many. With `limit`, at most that many,
   * so that deleting what grows with stored data (a client's or a user's tokens) goes in steps
   * (inPacedSteps) rather than one statement that holds the event loop (SQLite) for its length.
   * With `except`, a matching document that also matches `except` (every field of it equal) stays:
   * a sweep that runs until a step deletes none ends while what it keeps is still being written
   * (a client's tokens issued under its new epoch, while the old ones are swept).
   */
  deleteMany(filter: Filter, limit?: number, except?: Filter): Promise<number>;
  /**
   * Deletes documents whose `field` is less than `bound`, compared as the two stores order values of
   * one type (a string field with a string bound: ISO 8601 times by instant; a number with a number);
   * documents whose field has another type or is absent stay. With `limit`, at most that many (the
   * oldest first is not promised), so that a large purge can be made in steps. Returns how many.
   * Expired documents are removed like the others. An index on `field` keeps it cheap.
   */
  deleteBefore(field: string, bound: string | number, limit?: number): Promise<number>;
}

export interface Store {
  /** Declares a collection (idempotent; creates tables/indexes on first use). */
  collection<T extends StoredDoc = StoredDoc>(spec: CollectionSpec | string, tenant?: string): TenantCollection<T>;
  /** Next value of a named numeric sequence (1, 2, 3, ...), shared across tenants. */
  /** With `count`, reserves that many consecutive values at once and returns the last of them. */
  nextSequence(name: string, count?: number): Promise<number>;
  /**
   * Adds `amount` (default 1) to the counter `key` within its current window, atomically for every
   * process and node on this store: a counter that does not exist, or whose window has ended,
   * starts a new window of `windowMs` at `amount`. Answers the count and the window's end. For
   * limits that must hold across nodes (the auth-failure throttle, src/http/auth-failures.ts).
   * Counters are not documents of any collection or tenant; purgeExpired removes ended ones.
   */
  addToWindow(key: string, windowMs: number, amount?: number): Promise<WindowCount>;
  /** The counters among `keys` whose window has not ended, in one read; the others are absent from the map. */
  readWindows(keys: readonly string[]): Promise<Map<string, WindowCount>>;
  /** Resolves when the store answers and can be written; rejects otherwise (StoreUnavailableError when it knows why). */
  ping(): Promise<void>;
  /**
   * The store server's own clock (epoch ms), for stores that run on a server of their own that
   * every node shares (MongoDB): the reference the nodes' clocks are compared with (src/store/clock.ts).
   * Absent for an embedded store, which has no clock but the machine's.
   */
  clock?(): Promise<number>;
  /**
   * Removes expired documents everywhere (and ended windows). However many there are, in bounded
   * steps with the event loop given back between them (src/store/paced.ts): requests go on meanwhile.
   */
  purgeExpired(): Promise<number>;
  /**
   * Once (schema migration 3): makes a store whose file never shrank give the space of deleted
   * documents back from now on (SQLite: auto_vacuum=incremental, which takes one VACUUM of an
   * older file). Absent where the store server does so itself.
   */
  reclaimFreedSpace?(): Promise<void>;
  /**
   * What an operator must know of the server behind this store, said once at start (a warning):
   * FerretDB on the MongoDB wire, whose conditional writes are not atomic. Absent when there is none.
   */
  readonly caveats?: readonly string[];
  /**
   * Calls `listener` each time a write through this store object has ended (committed or failed),
   * before the writer is answered: what was read before may be stale from then on (TurnReads).
   */
  onWrite(listener: () => void): void;
  /**
   * Calls `listener` once a write through this store object to one of `collections` has ended,
   * before its writer is answered; other processes' writes are not told (changesTo sees them).
   * For what is held until a write, where the store has no `watch` (SQLite: a policy change made
   * on this process reaches OPA's held bundle request at once, not at its next look).
   */
  onWriteTo?(collections: readonly string[], listener: () => void): void;
  /**
   * A number that changes with every write to `collection` this call can know of: made through
   * this store object (counted before its writer is answered) or committed by another process on
   * the same store before this call. What was read of the collection while it answered a number
   * is still current while it answers the same one: TurnReads keeps such reads beyond a turn.
   * Absent where the store cannot tell without a round trip (PostgreSQL, MongoDB): reads are
   * shared within a turn there.
   */
  changesTo?(collection: string): number;
  /**
   * Calls `listener` after each write to one of `collections`, by this node or, within a round
   * trip, by another node of the same store (PostgreSQL: LISTEN/NOTIFY): for what a node keeps
   * longer than a turn (the policy snapshot). Absent where the store cannot tell (then only polling
   * sees other nodes' writes); where present, keep polling as the fallback.
   */
  watch?(collections: readonly string[], listener: () => void): void;
  /** The state of the store's connection pool (PostgreSQL), for /metrics; absent for a store that keeps none. */
  connections?(): PoolState;
  /** A consistent copy of the whole store into a file while it is in use; stores that cannot (MongoDB: mongodump) lack it. */
  backup?(destination: string): Promise<void>;
  close(): Promise<void>;
}

/** Store.connections: connections open (idle or busy), idle, statements waiting for one, and the pool's size. */
export interface PoolState {
  open: number;
  idle: number;
  waiting: number;
  max: number;
}

/** A counter of Store.addToWindow: its count in the current window, and when that window ends (epoch ms). */
export interface WindowCount {
  count: number;
  resetAt: number;
}

export class ConflictError extends Error {
  constructor(
    readonly collection: string,
    readonly fields: string[],
  ) {
    super(`a ${collection} record with the same ${fields.join(' + ')} already exists`);
    this.name = 'ConflictError';
  }
}

/**
 * The store cannot be trusted with a write, or cannot answer at all: its database file is
 * missing or was replaced, the disk refuses writes, the file is corrupt, or the database
 * server cannot be reached. A write that threw it was not acknowledged: with SQLite it was not
 * stored; with MongoDB a lost connection can leave its outcome unknown. Callers answer 503
 * `temporarily_unavailable`, at the endpoints oidc-provider answers itself too.
 */
export class StoreUnavailableError extends UnavailableToProvider {
  /**
   * @param reason what happened and what to do, for the log and the Admin API's operators: it may
   * name the database file, host or driver, which protocol callers are not told (error_description)
   */
  constructor(reason: string) {
    super('store', reason, STORE_UNAVAILABLE_FOR_CALLERS);
  }
}

/** Also recognises a StoreUnavailableError from a second copy of this module (see open.ts). */
export function isStoreUnavailable(error: unknown): error is StoreUnavailableError {
  return (
    error instanceof StoreUnavailableError ||
    (error instanceof Error &&
      error.name === 'StoreUnavailableError' &&
      typeof (error as { reason?: unknown }).reason === 'string')
  );
}
