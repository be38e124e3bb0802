import { createHash } from 'node:crypto';
import type { Filter, FindOptions, Store, StoredDoc, TenantCollection, TextSearch } from '../store/index.js';
import type { AuditEntry } from './entry.js';
import { AUDIT_SHAPES_COLLECTION } from './collections.js';

type Shape = StoredDoc & {
  id: string;
  requestSummary: unknown;
  policyInput: unknown;
  policyDecision: unknown;
  ip: string | null;
  userAgent: string | null;
  /** A shape outlives the last entry naming it by the retention and a day; none when entries are kept forever. */
  expiresAt?: number;
};

/** The shapes a node knows to be stored (with the expiry written), and the shapes it last read: bounded. */
const KNOWN_SHAPES = 10_000;
const DAY_MS = 86_400_000;

/** An entry as stored from now on: the fields filtered, sorted and listed on, the shape's digest, the input's time. */
type Compacted = Omit<AuditEntry, 'requestSummary' | 'policyInput' | 'policyDecision' | 'ip' | 'userAgent'> & {
  shape: string;
  /** policyInput.time minus createdAt, in ms; absent when the input had no time of that form (it is then in the shape). */
  inputTime?: number;
};

/**
 * The audit log's collection as the rest of src/audit sees it (full entries): it writes entries
 * compacted and expands what it reads. Entries written before compaction (no `shape`) read as they
 * are. An entry whose shape is gone (a retention made longer after it was written) reads with null
 * in the shape's fields.
 */
export class CompactAuditEntries implements TenantCollection<AuditEntry> {
  readonly tenant: string;
  private readonly shapes: TenantCollection<Shape>;
  /** Digest → expiry written (0: none): a shape known here is written again only to push its expiry on. */
  private readonly written = new Map<string, number>();
  private readonly read = new Map<string, Shape>();

  constructor(
    store: Store,
    private readonly raw: TenantCollection<AuditEntry>,
    /** AUDIT_RETENTION_DAYS (0: forever). */
    private readonly retentionDays: number,
  ) {
    this.tenant = raw.tenant;
    this.shapes = store.collection<Shape>(AUDIT_SHAPES_COLLECTION, raw.tenant);
  }

  async insertMany(docs: readonly AuditEntry[]): Promise<AuditEntry[]> {
    const shapes = new Map<string, Shape>();
    const compacted = docs.map((doc) => {
      const { entry, shape } = compact(doc);
      shapes.set(shape.id, shape);
      return entry;
    });
    await this.storeShapes([...shapes.values()]);
    await this.raw.insertMany(compacted as unknown as AuditEntry[]);
    return [...docs];
  }

  async insert(doc: AuditEntry): Promise<AuditEntry> {
    await this.insertMany([doc]);
    return doc;
  }

  async get(id: string | number): Promise<AuditEntry | null> {
    const found = await this.raw.get(id);
    return found && (await this.expand([found]))[0]!; // one entry in, one out
  }

  async getMany(ids: readonly (string | number)[]): Promise<AuditEntry[]> {
    return this.expand(await this.raw.getMany(ids));
  }

  async findOne(filter: Filter): Promise<AuditEntry | null> {
    const found = await this.raw.findOne(filter);
    return found && (await this.expand([found]))[0]!; // one entry in, one out
  }

  async find(filter?: Filter, options?: FindOptions): Promise<AuditEntry[]> {
    return this.expand(await this.raw.find(filter, options));
  }

  /** Entries as stored (not expanded): for a count that reads them. */
  findStored(filter?: Filter, options?: FindOptions): Promise<AuditEntry[]> {
    return this.raw.find(filter, options);
  }

  count(filter?: Filter, search?: TextSearch, atMost?: number): Promise<number> {
    return this.raw.count(filter, search, atMost);
  }

  deleteBefore(field: string, bound: string | number, limit?: number): Promise<number> {
    return this.raw.deleteBefore(field, bound, limit);
  }

  deleteMany(filter: Filter, limit?: number, except?: Filter): Promise<number> {
    return this.raw.deleteMany(filter, limit, except);
  }

  delete(id: string | number): Promise<boolean> {
    return this.raw.delete(id);
  }

  /** The length of the stored JSON of the newest `count` entries. */
  async storedSizes(count: number): Promise<number[]> {
    const newest = await this.raw.find({}, { sort: { field: 'createdAt', direction: 'desc' }, limit: count });
    return newest.map((doc) => JSON.stringify(doc).length);
  }

  /** The log is append-only: entries are never changed once written. */
  upsert(): Promise<AuditEntry> {
    return Promise.reject(new Error('audit entries are append-only'));
  }

  update(): Promise<AuditEntry | null> {
    return Promise.reject(new Error('audit entries are append-only'));
  }

  /** Writes the shapes this node has not written lately (another node's copy is replaced by the same value). */
  private async storeShapes(shapes: Shape[]): Promise<void> {
    const now = Date.now();
    const expiresAt = this.retentionDays > 0 ? now + (this.retentionDays + 1) * DAY_MS : 0;
    for (const shape of shapes) {
      const written = this.written.get(shape.id);
      // Written with an expiry at least a day beyond the newest entry's retention: nothing to do.
      if (written !== undefined && (written === 0 || written - now > this.retentionDays * DAY_MS)) continue;
      await this.shapes.upsert(expiresAt ? { ...shape, expiresAt } : shape);
      remember(this.written, shape.id, expiresAt);
    }
  }

  private async expand(found: AuditEntry[]): Promise<AuditEntry[]> {
    const wanted = new Set<string>();
    for (const doc of found) {
      const digest = (doc as Partial<Compacted>).shape;
      if (typeof digest === 'string' && !this.read.has(digest)) wanted.add(digest);
    }
    if (wanted.size) for (const shape of await this.shapes.getMany([...wanted])) remember(this.read, shape.id, shape);
    return found.map((doc) => expand(doc, this.read));
  }
}

function remember<T>(map: Map<string, T>, key: string, value: T): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > KNOWN_SHAPES) map.delete(map.keys().next().value as string);
}

function compact(doc: AuditEntry): { entry: Compacted; shape: Shape } {
  const { requestSummary, policyInput, policyDecision, ip, userAgent, ...kept } = doc;
  const { input, inputTime } = withoutTime(policyInput, doc.createdAt);
  const content = { requestSummary, policyInput: input, policyDecision, ip, userAgent };
  const id = digestOf(JSON.stringify(content));
  // Null fields are left out: a filter on null matches an absent field in every store.
  const entry = {} as Compacted;
  for (const field in kept) {
    const value = kept[field as keyof typeof kept];
    if (value !== null) (entry as Record<string, unknown>)[field] = value;
  }
  entry.shape = id;
  if (inputTime !== undefined) entry.inputTime = inputTime;
  return { entry, shape: { id, ...content } };
}

/** The digests of the shapes this node last made, by their JSON: a caller's requests repeat one (at most ~4 MB). */
const digests = new Map<string, string>();
const KNOWN_DIGESTS = 1_000;
const REMEMBERED_JSON_LENGTH = 4_096;

/** A shape's id: the first 22 characters of the base64url SHA-256 of its JSON (hashed once per distinct shape here). */
function digestOf(json: string): string {
  let digest = digests.get(json);
  if (digest === undefined) {
    digest = createHash('sha256').update(json).digest('base64url').slice(0, 22);
    if (json.length > REMEMBERED_JSON_LENGTH) return digest;
    if (digests.size >= KNOWN_DIGESTS) digests.delete(digests.keys().next().value as string);
    digests.set(json, digest);
  }
  return digest;
}

/** An input's `time` (an ISO 8601 instant) moves to the entry as an offset: the rest repeats. */
function withoutTime(policyInput: unknown, createdAt: string): { input: unknown; inputTime?: number } {
  if (typeof policyInput !== 'object' || policyInput === null || Array.isArray(policyInput))
    return { input: policyInput };
  const { time, ...rest } = policyInput as Record<string, unknown>;
  if (typeof time !== 'string' || Number.isNaN(Date.parse(time)) || new Date(time).toISOString() !== time)
    return { input: policyInput };
  return { input: rest, inputTime: Date.parse(time) - Date.parse(createdAt) };
}

const ABSENT_AS_NULL = ['tenantId', 'clientId', 'subjectId', 'requestId'] as const;

function expand(doc: AuditEntry, shapes: Map<string, Shape>): AuditEntry {
  const { shape: digest, inputTime, ...fields } = doc as unknown as Compacted;
  if (typeof digest !== 'string') return doc;
  const shape = shapes.get(digest);
  const input =
    inputTime !== undefined && typeof shape?.policyInput === 'object' && shape.policyInput !== null
      ? { ...shape.policyInput, time: new Date(Date.parse(fields.createdAt as string) + inputTime).toISOString() }
      : (shape?.policyInput ?? null);
  const entry = {
    ...fields,
    requestSummary: (shape?.requestSummary ?? {}) as Record<string, unknown>,
    policyInput: input,
    policyDecision: shape?.policyDecision ?? null,
    ip: shape?.ip ?? null,
    userAgent: shape?.userAgent ?? null,
  } as AuditEntry;
  for (const field of ABSENT_AS_NULL) entry[field] ??= null;
  return entry;
}
