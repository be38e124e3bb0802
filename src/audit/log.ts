import type { Logger } from '../log/index.js';
import {
  BatchWriter,
  DEFAULT_TENANT,
  EVENT_LOOP_PACE,
  inPacedSteps,
  isStoreUnavailable,
  type Filter,
  type Store,
} from '../store/index.js';
import { withoutNul } from './bounds.js';
import { RefusalBudget, type RefusalBudgetLimits } from './budget.js';
import type { AuditEntry, AuditFields, Outcome } from './entry.js';
import type { RecordedDecision, TrialInput } from '../policy/index.js';
import {
  decisionsOfEntry,
  RecordedDecisionPages,
  type RecordedDecisionCursor,
  type RecordedDecisionQuery,
} from './recorded-decisions.js';
import { RecentActivity } from './activity.js';
import { LatestDecisions } from './latest-decisions.js';
import { CompactAuditEntries } from './compact.js';
import { AllowedCounts } from './allowed-counts.js';
import { AUDIT_LOG_COLLECTION } from './collections.js';

export type { AuditFields, Outcome } from './entry.js';

export type { AuditEntry } from './entry.js';

export interface AuditPageQuery {
  /** consoleRead null: the entries that are not the console's own reads. */
  filter: { endpoint?: string; tenantId?: string | null; clientId?: string; outcome?: Outcome; consoleRead?: null };
  page: number;
  size: number;
  sort: { field: string; direction: 'asc' | 'desc' };
  /** Where the page starts: the previous page's nextCursor (of the same filter and sort); else `page`. */
  cursor?: AuditCursor;
  /** Only the entries created from `from` to `to` (ISO 8601 instants as toISOString writes them, both included); the page is then sorted by createdAt. */
  range?: { from?: string; to?: string };
}

export interface AuditPage {
  content: AuditEntry[];
  /** How many entries match, counted up to AUDIT_COUNT_CAP (see totalElementsCapped). */
  totalElements: number;
  totalPages: number;
  number: number;
  size: number;
  /** More entries match than totalElements says: counting stopped at AUDIT_COUNT_CAP. */
  totalElementsCapped: boolean;
  /** The next page's start (sorting by id or createdAt), to pass as `cursor`; null on the last page, or with another sort. */
  nextCursor: string | null;
}

/** Counting the matches of a page's filter stops here: the console says "10,000+" rather than read a million entries per page. */
export const AUDIT_COUNT_CAP = 10_000;

/** The sort fields every entry has (never null), so that a cursor on them can say where the next page starts. */
const CURSOR_FIELDS = ['id', 'createdAt'];

/** A page's start in the sort order: at the sort value `at`, past the `seen` entries of that value that earlier pages showed. */
export interface AuditCursor {
  at: string | number;
  seen: number;
}

/** A cursor as the API hands it out: opaque (base64url of JSON). */
export function encodeAuditCursor(cursor: AuditCursor): string {
  return Buffer.from(JSON.stringify([cursor.at, cursor.seen])).toString('base64url');
}

/**
 * The cursor `text` names, or null when it is not one encodeAuditCursor made. `seen` becomes the
 * entries a store skips one by one, so it is bounded as numbered pages are (AUDIT_COUNT_CAP): no
 * page of one sort value holds more. Found 2026-11-30: a forged cursor with a huge `seen` had
 * SQLite step through the whole log on its one thread, for any read-only key.
 */
export function decodeAuditCursor(text: string): AuditCursor | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 2) return null;
    const [at, seen] = value as unknown[];
    if (!(typeof at === 'string' || Number.isSafeInteger(at)) || !withinSkipBound(seen)) return null;
    return { at: at as string | number, seen: seen as number };
  } catch {
    return null;
  }
}

/** Whether `seen`, a cursor's count of entries already shown at its sort value, is one a store may skip. */
export function withinSkipBound(seen: unknown): seen is number {
  return Number.isSafeInteger(seen) && (seen as number) >= 0 && (seen as number) <= AUDIT_COUNT_CAP;
}

/**
 * The sorts a page of the audit log may take: those an index serves, so that a page costs the same
 * whatever the log's size (endpoint, client and outcome are filters, not sorts: sorting a tenant's
 * whole log by one of them blocked SQLite's one thread for as long as the log was long).
 */
export const SORTABLE_FIELDS = ['id', 'createdAt'];

/** At most this many of the newest entries are read for a sample of recorded policy inputs, this many at a time. */
const SAMPLE_SCAN_LIMIT = 2000;
const SAMPLE_SCAN_STEP = 250;

/** How many audit ids one node reserves at a time. */
const AUDIT_ID_BLOCK = 100;

/**
 * The entries of the requests answered in one turn of the event loop share one write (under load
 * a turn lasts a few milliseconds; while a MongoDB write is under way, the next batch gathers until
 * it ends). A fixed wait would add its length to every request of a sequential caller: with 2 ms,
 * one caller appending in a loop fell from ~2,000 to ~300 entries/s, while 64 concurrent callers
 * gained nothing over the next turn. A batch never exceeds an id block, so it reserves ids at most once.
 */
const MAX_BATCH_ENTRIES = AUDIT_ID_BLOCK;

export interface AuditLogOptions {
  /** Refused unauthenticated requests are counted rather than written one entry each beyond this (see RefusalBudget); none: all written. */
  refusals?: RefusalBudgetLimits;
  /** AUDIT_RETENTION_DAYS: how long the latest decision of a (client, point) is remembered for trials (0: as long as 90). */
  retentionDays?: number;
  /** How allowed protocol requests are recorded (AUDIT_ALLOWED_*); none: an entry each. */
  allowed?: AllowedRecording;
}

export interface AllowedRecording {
  /** Endpoints (with the paths below them) whose allowed requests are counted per window. */
  counted: readonly string[];
  /** Endpoints whose allowed requests get no entry. */
  unrecorded: readonly string[];
  windowSeconds: number;
}

/**
 * What an entry costs on SQLite besides its JSON (its row and the eight index entries), measured
 * by bench/audit-size.ts: the size bound (AUDIT_RETENTION_MAX_MB) counts it with the entries' own size.
 */
const ENTRY_OVERHEAD_BYTES = 300;
/** The newest entries whose average size the size bound takes for every entry's. */
const SIZE_SAMPLE = 200;

/** Trials and the default replay of impact analysis take the latest decision of at most this many (client, point) pairs, newest first. */
export const STRATIFIED_PAIRS = 2000;
const DEFAULT_RETENTION_DAYS = 90;

/** An entry waiting for its batch: createdAt is when it was appended (the request was answered), not when written. */
interface Appended {
  fields: AuditFields;
  createdAt: string;
}

/** A batch of entries the store did not take: the store's reason, without the entries themselves. */
export class AuditWriteError extends Error {
  constructor(
    readonly entries: number,
    cause: unknown,
  ) {
    super(`${entries} audit entries were not written: ${reasonOf(cause)}`);
    this.name = 'AuditWriteError';
    this.stack = `${this.name}: ${this.message}`;
  }
}

function reasonOf(error: unknown): string {
  if (isStoreUnavailable(error)) return error.reason;
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * The append-only audit log. Entries of every tenant share one collection and carry their tenantId.
 * Entries are written in batches (one store write for the entries of concurrent requests), in the
 * order they were appended; append resolves once its entry is stored.
 */
export class AuditLog {
  private readonly entries: CompactAuditEntries;
  private readonly writer: BatchWriter<Appended, AuditEntry>;
  private readonly refusals: RefusalBudget | null;
  private readonly allowed: { counts: AllowedCounts | null; counted: readonly string[]; unrecorded: readonly string[] };
  private ids = { next: 1, last: 0 };
  /** Set by close: a retention purge under way stops at its next step. */
  private closed = false;
  private readonly written: ((entries: AuditEntry[]) => void)[] = [];
  /** The decisions of the last hour, per tenant, counted as entries are written, shared by every process (the console's overview). */
  readonly activity: RecentActivity;
  /** The latest decision of every (tenant, client, point): what trials and impact analysis try first. */
  private readonly latest: LatestDecisions;

  constructor(
    private readonly store: Store,
    private readonly log?: Logger,
    options: AuditLogOptions = {},
  ) {
    const retentionDays = options.retentionDays ?? DEFAULT_RETENTION_DAYS;
    this.entries = new CompactAuditEntries(
      store,
      store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT),
      retentionDays,
    );
    this.activity = new RecentActivity(store, log);
    this.latest = new LatestDecisions(store, this.entries, retentionDays || DEFAULT_RETENTION_DAYS, log);
    this.writer = new BatchWriter({
      write: (fields) => this.write(fields),
      maxItems: MAX_BATCH_ENTRIES,
      onFailure: (error, entries) => log?.error({ err: error }, `audit batch of ${entries} entries not written`),
    });
    this.refusals = options.refusals
      ? new RefusalBudget(options.refusals, (entry) => this.appendAggregate(entry))
      : null;
    const { counted = [], unrecorded = [], windowSeconds = 60 } = options.allowed ?? {};
    this.allowed = {
      counts: counted.length ? new AllowedCounts(windowSeconds * 1000, (entry) => this.appendAggregate(entry)) : null,
      counted,
      unrecorded,
    };
  }

  /**
   * The entry of an allowed protocol request: appended, unless its endpoint is one of
   * AUDIT_ALLOWED_UNRECORDED (nothing is written) or AUDIT_ALLOWED_COUNTED (counted, written in
   * the window's aggregated entry; resolves at once).
   */
  async appendAllowed(entry: AuditFields): Promise<void> {
    if (underAny(entry.endpoint, this.allowed.unrecorded)) return;
    if (this.allowed.counts && underAny(entry.endpoint, this.allowed.counted)) return this.allowed.counts.count(entry);
    await this.append(entry);
  }

  /** Resolves with the entry once the batch holding it is stored; rejects with an AuditWriteError when that batch failed, or once the log is closed. */
  async append(entry: AuditFields): Promise<AuditEntry> {
    return this.writer.add({ fields: withoutNul(entry), createdAt: new Date().toISOString() });
  }

  /**
   * An allowed protocol request of a caller nobody authenticated, which asked no decision (a
   * browser's first GET /authorize, sent on to sign in): as appendAllowed says, within the budget
   * of such callers' refusals, so that nobody can write the log an entry per request at will.
   */
  async appendAllowedUnauthenticated(entry: AuditFields): Promise<void> {
    if (underAny(entry.endpoint, this.allowed.unrecorded)) return;
    if (this.allowed.counts && underAny(entry.endpoint, this.allowed.counted)) return this.allowed.counts.count(entry);
    await this.appendRefusal(entry, false);
  }

  /**
   * The entry of a request refused (4xx) to a caller nobody authenticated: appended while its
   * address is within its budget, else only counted (resolves at once), to be written in the
   * address's aggregated entry at the end of the window. A request naming a tenant that does not
   * exist is always counted.
   */
  async appendRefusal(entry: AuditFields, unknownTenant: boolean): Promise<void> {
    if (this.refusals && !this.refusals.admit(entry, unknownTenant)) return;
    await this.append(entry);
  }

  private appendAggregate(entry: AuditFields): void {
    this.append(entry).catch((error: unknown) => this.log?.error({ err: error }, 'aggregated audit entry not written'));
  }

  /**
   * Deletes the entries created before `cutoff` (the retention, AUDIT_RETENTION_DAYS) in paced steps
   * (src/store/paced.ts: requests go on between them, however many there are); returns how many.
   * Uses the index on createdAt.
   */
  async purgeOlderThan(cutoff: Date): Promise<number> {
    const bound = cutoff.toISOString();
    return inPacedSteps(
      async (limit) => (this.closed ? 0 : this.entries.deleteBefore('createdAt', bound, limit)),
      EVENT_LOOP_PACE,
    );
  }

  /**
   * Deletes the oldest entries until the log holds about `maxBytes` (AUDIT_RETENTION_MAX_MB), in
   * the paced steps of purgeOlderThan; returns how many. An entry's size is the average of the
   * newest SIZE_SAMPLE entries' stored JSON with ENTRY_OVERHEAD_BYTES: an estimate that holds
   * while entries look alike, as a store has no cheap measure of one collection's bytes.
   */
  async purgeBeyondSize(maxBytes: number): Promise<number> {
    const sample = await this.entries.storedSizes(SIZE_SAMPLE);
    if (sample.length === 0) return 0;
    const entryBytes = sample.reduce((sum, size) => sum + size, 0) / sample.length + ENTRY_OVERHEAD_BYTES;
    const excess = (await this.entries.count()) - Math.floor(maxBytes / entryBytes);
    if (excess <= 0) return 0;
    // The oldest entry kept: every entry created before it goes.
    const [kept] = await this.entries.find(
      {},
      { sort: { field: 'createdAt', direction: 'asc' }, skip: excess, limit: 1 },
    );
    return kept ? this.purgeOlderThan(new Date(kept.createdAt)) : 0;
  }

  /** Writes the entries appended so far; resolves once they are stored (or their batch failed). */
  async flush(): Promise<void> {
    await this.writer.flush();
  }

  /** Writes the counts kept, flushes, and refuses later entries: for a stopping server, before its store closes. */
  async close(): Promise<void> {
    this.closed = true;
    this.refusals?.close();
    this.allowed.counts?.close();
    await this.writer.close();
    await this.activity.close();
    await this.latest.close();
  }

  /**
   * Calls `listener` with every batch of entries once it is stored (the shadow policy evaluates
   * their decisions), in a later turn of the event loop than the one that answers their requests.
   */
  onWritten(listener: (entries: AuditEntry[]) => void): void {
    this.written.push(listener);
  }

  /** Batches are written one at a time (BatchWriter), so ids are taken in append order. */
  private async write(appended: Appended[]): Promise<AuditEntry[]> {
    let stored: AuditEntry[];
    try {
      const ids = await this.takeIds(appended.length);
      stored = await this.entries.insertMany(
        appended.map(({ fields, createdAt }, index) => ({ ...fields, id: ids[index]!, createdAt })),
      );
    } catch (error) {
      throw new AuditWriteError(appended.length, error);
    }
    // After the batch's callers are answered: counting and the shadow's queue never delay an answer.
    setImmediate(() => this.tellWritten(stored));
    return stored;
  }

  private tellWritten(stored: AuditEntry[]): void {
    const own = [
      (entries: AuditEntry[]) => this.activity.observe(entries),
      (entries: AuditEntry[]) => this.latest.observe(entries),
    ];
    for (const listener of [...own, ...this.written]) {
      try {
        listener(stored);
      } catch (error) {
        this.log?.error({ err: error }, 'a listener of written audit entries failed');
      }
    }
  }

  /** One tenant's recorded decisions, newest first, a page at a time (impact analysis replays them); `resumeAt` continues a read that reached its limit. */
  recordedDecisions(query: RecordedDecisionQuery, resumeAt?: RecordedDecisionCursor): RecordedDecisionPages {
    return new RecordedDecisionPages(this.entries, query, resumeAt);
  }

  /**
   * The query's decisions, stratified: first the latest decision of every (client, point) the
   * query covers (at most STRATIFIED_PAIRS, newest first), then the newest others, at most `limit`
   * in all: impact analysis's default replay, so that a chatty client cannot crowd a weekly job
   * out. `stoppedAt` is where the newest others stopped: a call resuming there (`resumeAt`) goes on
   * with the older others, leaving out the latest decisions of the pairs again (taken first).
   */
  stratifiedDecisions(
    query: RecordedDecisionQuery,
    resumeAt?: RecordedDecisionCursor,
  ): AsyncIterable<RecordedDecision[]> & { readonly stoppedAt: RecordedDecisionCursor | null } {
    const latest = this.latest;
    const entries = this.entries;
    let rest: RecordedDecisionPages | null = null;
    return {
      get stoppedAt() {
        return rest?.stoppedAt ?? null;
      },
      async *[Symbol.asyncIterator]() {
        const firsts = await latest.decisions(STRATIFIED_PAIRS, query);
        const taken = new Set(firsts.map(decisionKey));
        const excluded = (decision: RecordedDecision) => taken.has(decisionKey(decision));
        if (resumeAt) {
          rest = new RecordedDecisionPages(entries, query, resumeAt, excluded);
          yield* rest;
          return;
        }
        const first = firsts.slice(0, query.limit);
        if (first.length) yield first;
        if (query.limit - first.length <= 0) return;
        rest = new RecordedDecisionPages(entries, { ...query, limit: query.limit - first.length }, undefined, excluded);
        yield* rest;
      },
    };
  }

  /**
   * Ids come from blocks of the store's sequence reserved ahead, so a batch costs one write
   * rather than two. Ids stay unique across nodes and rising within a node; a crash leaves a gap.
   */
  private async takeIds(count: number): Promise<number[]> {
    const ids: number[] = [];
    while (ids.length < count) {
      if (this.ids.next > this.ids.last) {
        const size = Math.max(AUDIT_ID_BLOCK, count - ids.length);
        const last = await this.store.nextSequence(AUDIT_LOG_COLLECTION.name, size);
        this.ids = { next: last - size + 1, last };
      }
      ids.push(this.ids.next++);
    }
    return ids;
  }

  /**
   * The policy inputs a policy change is tried on before it is stored (src/policy/bundle/trial.ts),
   * stratified: first the latest input of every (tenant, client, point) in the retention window
   * (at most STRATIFIED_PAIRS, newest first), so that a low-volume client is never left out; then,
   * per decision point, the newest `perPoint` inputs among the newest SAMPLE_SCAN_LIMIT entries.
   * Two inputs that differ only in `time` are one.
   */
  async recentPolicyInputs(perPoint: number): Promise<TrialInput[]> {
    if (perPoint <= 0) return [];
    const sample: TrialInput[] = [];
    const keyOf = (point: string, input: Record<string, unknown>) => {
      const { time: _time, ...timeless } = input;
      return `${point} ${JSON.stringify(timeless)}`;
    };
    const stratified = new Set<string>();
    for (const decision of await this.latest.decisions(STRATIFIED_PAIRS)) {
      if (!isObject(decision.input)) continue;
      const key = keyOf(decision.point, decision.input);
      if (stratified.has(key)) continue;
      stratified.add(key);
      sample.push({
        point: decision.point,
        input: decision.input,
        source: `the input recorded in audit entry ${decision.auditId} (the latest of client ${decision.clientId ?? '(none)'} at ${decision.point})`,
      });
    }
    // The newest `perPoint` distinct inputs of each point, whether the latest of a pair already took them or not.
    const newest = new Set<string>();
    const counts = new Map<string, number>();
    for (let skip = 0; skip < SAMPLE_SCAN_LIMIT; skip += SAMPLE_SCAN_STEP) {
      const entries = await this.entries.find(
        {},
        { sort: { field: 'createdAt', direction: 'desc' }, skip, limit: SAMPLE_SCAN_STEP },
      );
      // Traffic only: the playground's decisions (asked at the Admin API, even by a read-only key) are left out.
      for (const { point, input, auditId } of entries.flatMap(decisionsOfEntry)) {
        if ((counts.get(point) ?? 0) >= perPoint || !isObject(input)) continue;
        const key = keyOf(point, input);
        if (newest.has(key)) continue;
        newest.add(key);
        counts.set(point, (counts.get(point) ?? 0) + 1);
        if (!stratified.has(key)) sample.push({ point, input, source: `the input recorded in audit entry ${auditId}` });
      }
      if (entries.length < SAMPLE_SCAN_STEP) break;
    }
    return sample;
  }

  async get(id: number): Promise<AuditEntry | null> {
    return this.entries.get(id);
  }

  /**
   * One page, read off the indexes (see AUDIT_LOG_COLLECTION) with the count capped at
   * AUDIT_COUNT_CAP. With a cursor, the page starts where the previous one ended (keyset: it costs
   * the same at any depth); with `page` alone, the entries before it are skipped one by one.
   */
  async page(query: AuditPageQuery): Promise<AuditPage> {
    const filter: Filter = Object.fromEntries(
      Object.entries(query.filter).filter(([, value]) => value !== undefined),
    ) as Filter;
    if (query.range) return this.pageInRange(filter, query, query.range);
    const start = query.cursor
      ? { startAt: query.cursor.at, skip: query.cursor.seen }
      : { skip: query.page * query.size };
    const [found, counted] = await Promise.all([
      this.entries.find(filter, { sort: query.sort, ...start, limit: query.size + 1 }),
      this.entries.count(filter, undefined, AUDIT_COUNT_CAP + 1),
    ]);
    const content = found.slice(0, query.size);
    return pageOf(content, counted, query, found.length > query.size ? nextCursorOf(content, query) : null);
  }

  /**
   * A page of the entries created within `range`, by keyset on createdAt (the sort's direction
   * kept): it starts at the range's near end (or the cursor) and stops at its far end. Stores
   * filter by equality only, so the count reads the range's entries (stored form), up to AUDIT_COUNT_CAP.
   */
  private async pageInRange(
    filter: Filter,
    query: AuditPageQuery,
    range: { from?: string; to?: string },
  ): Promise<AuditPage> {
    const sort = { field: 'createdAt', direction: query.sort.direction };
    const [near, far] = sort.direction === 'desc' ? [range.to, range.from] : [range.from, range.to];
    const within = (entry: { createdAt: string }) =>
      far === undefined || (sort.direction === 'desc' ? entry.createdAt >= far : entry.createdAt <= far);
    const start = query.cursor
      ? { startAt: query.cursor.at, skip: query.cursor.seen }
      : { ...(near === undefined ? {} : { startAt: near }), skip: query.page * query.size };
    const [found, counted] = await Promise.all([
      this.entries.find(filter, { sort, ...start, limit: query.size + 1 }),
      this.countWithin(filter, sort, near, within),
    ]);
    const inRange = takeWhile(found, within);
    const content = inRange.slice(0, query.size);
    const sorted = { ...query, sort };
    return pageOf(content, counted, sorted, inRange.length > query.size ? nextCursorOf(content, sorted) : null);
  }

  private async countWithin(
    filter: Filter,
    sort: { field: string; direction: 'asc' | 'desc' },
    near: string | undefined,
    within: (entry: { createdAt: string }) => boolean,
  ): Promise<number> {
    let counted = 0;
    let position: AuditCursor | null = near === undefined ? null : { at: near, seen: 0 };
    while (counted <= AUDIT_COUNT_CAP) {
      const step = await this.entries.findStored(filter, {
        sort,
        ...(position ? { startAt: position.at, skip: position.seen } : {}),
        limit: RANGE_COUNT_STEP,
      });
      const kept = takeWhile(step, within);
      counted += kept.length;
      if (kept.length < RANGE_COUNT_STEP) break;
      const at = kept.at(-1)!.createdAt; // a full step
      const seen = kept.filter((entry) => entry.createdAt === at).length;
      position = { at, seen: (position?.at === at ? position.seen : 0) + seen };
    }
    return counted;
  }
}

/** Entries a time range's count reads at a time. */
const RANGE_COUNT_STEP = 1_000;

/** After the last entry of `content`: its sort value, past every entry of that value shown so far. */
function nextCursorOf(content: AuditEntry[], query: AuditPageQuery): string | null {
  const field = query.sort.field;
  const last = content.at(-1);
  if (!last || !CURSOR_FIELDS.includes(field)) return null;
  const at = last[field] as string | number;
  const onThisPage = content.filter((entry) => entry[field] === at).length;
  const before = query.cursor?.at === at ? query.cursor.seen : 0;
  return encodeAuditCursor({ at, seen: before + onThisPage });
}

/** The endpoint is one of `endpoints` or a path below one. */
function underAny(endpoint: string, endpoints: readonly string[]): boolean {
  return endpoints.some((each) => endpoint === each || endpoint.startsWith(`${each}/`));
}

function pageOf(content: AuditEntry[], counted: number, query: AuditPageQuery, nextCursor: string | null): AuditPage {
  const totalElements = Math.min(counted, AUDIT_COUNT_CAP);
  return {
    content,
    totalElements,
    totalPages: Math.ceil(totalElements / query.size),
    number: query.page,
    size: query.size,
    totalElementsCapped: counted > AUDIT_COUNT_CAP,
    nextCursor,
  };
}

function takeWhile<T>(items: T[], keep: (item: T) => boolean): T[] {
  const end = items.findIndex((item) => !keep(item));
  return end === -1 ? items : items.slice(0, end);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function decisionKey(decision: RecordedDecision): string {
  return `${decision.auditId} ${decision.index ?? 0}`;
}
