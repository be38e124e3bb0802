import { isAdminPath } from '../http/admin-path.js';
import type { RecordedDecision } from '../policy/index.js';
import type { Filter, TenantCollection } from '../store/index.js';
import type { AuditEntry } from './entry.js';
import { eachRecorded } from './recorded.js';

/** Which recorded decisions to replay: one tenant's, the newest first, optionally of one point or client and within a time range. */
export interface RecordedDecisionQuery {
  tenantId: string | null;
  point?: string;
  clientId?: string;
  /** ISO 8601 instants (UTC, as createdAt is written); `from` inclusive, `to` exclusive. */
  from?: string;
  to?: string;
  /** At most this many decisions. */
  limit: number;
}

/** Entries read per page. */
const PAGE_ENTRIES = 250;

/**
 * The decisions an audit entry holds, as replays take them: one per decision point asked (an
 * AuthZEN batch or a UMA request holds several). Decisions asked at the Admin API (the
 * playground's) are not traffic and are left out, as are entries of records without a point.
 */
export function decisionsOfEntry(entry: AuditEntry): RecordedDecision[] {
  if (isAdminPath(entry.endpoint)) return [];
  const inputs = eachRecorded(entry.policyInput);
  const decisions = eachRecorded(entry.policyDecision);
  if (!inputs || !decisions || inputs.length !== decisions.length) return [];
  const several = inputs.length > 1;
  return inputs.flatMap((input, index): RecordedDecision[] => {
    const decision = decisions[index] as Record<string, unknown> | null;
    if (!decision || typeof decision.point !== 'string') return [];
    const subject = (input as { subject?: { sub?: unknown } } | null)?.subject?.sub;
    return [
      {
        auditId: entry.id,
        ...(several ? { index } : {}),
        time: entry.createdAt,
        tenantId: entry.tenantId,
        point: decision.point,
        clientId: entry.clientId,
        subject: typeof subject === 'string' ? subject : entry.subjectId,
        input,
        decision,
      },
    ];
  });
}

/**
 * Where a read of recorded decisions stopped at its limit, to resume there: past the `seen` entries
 * recorded at `at` already read, and past the first `taken` decisions of the next entry.
 */
export interface RecordedDecisionCursor {
  at: string;
  seen: number;
  taken: number;
}

/**
 * The query's decisions, a page at a time, newest first (by createdAt, as the audit log lists
 * entries). Pages are read by keyset (each starts at the createdAt the previous one ended at, past
 * the entries of that instant already read), so the 400th page costs what the first does; entries
 * written meanwhile are newer than the first page and never shift the others. `resumeAt` (a
 * previous read's `stoppedAt`) starts where that read reached its limit; once read to the end,
 * `stoppedAt` is where the next read of as many would resume, or null when nothing is left.
 */
export class RecordedDecisionPages implements AsyncIterable<RecordedDecision[]> {
  stoppedAt: RecordedDecisionCursor | null = null;

  constructor(
    private readonly entries: TenantCollection<AuditEntry>,
    private readonly query: RecordedDecisionQuery,
    private readonly resumeAt?: RecordedDecisionCursor,
    /** Decisions left out, and not counted (a stratified replay's, taken first: AuditLog.stratifiedDecisions). */
    private readonly excluded: (decision: RecordedDecision) => boolean = () => false,
  ) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<RecordedDecision[]> {
    const { query } = this;
    const filter: Filter = { tenantId: query.tenantId };
    if (query.clientId !== undefined) filter.clientId = query.clientId;
    const sort = { field: 'createdAt', direction: 'desc' } as const;
    /** Where the next entry to read is. */
    let position: RecordedDecisionCursor | undefined = this.resumeAt;
    let found = 0;
    for (;;) {
      const bound = position?.at ?? query.to;
      const page = await this.entries.find(filter, {
        sort,
        ...(bound === undefined ? {} : { startAt: bound }),
        skip: position?.seen ?? 0,
        limit: PAGE_ENTRIES,
      });
      const decisions: RecordedDecision[] = [];
      for (const entry of page) {
        if (query.from !== undefined && entry.createdAt < query.from) {
          yield* this.stop(decisions, null);
          return;
        }
        const taken = position?.taken ?? 0;
        const next = (by: number): RecordedDecisionCursor => ({
          at: entry.createdAt,
          seen: (position?.at === entry.createdAt ? position.seen : 0) + by,
          taken: 0,
        });
        if (query.to !== undefined && entry.createdAt >= query.to) {
          position = next(1);
          continue;
        }
        const all = decisionsOfEntry(entry).filter(
          (decision) => (query.point === undefined || decision.point === query.point) && !this.excluded(decision),
        );
        const room = query.limit - found;
        const kept = all.slice(taken, taken + room);
        decisions.push(...kept);
        found += kept.length;
        if (taken + kept.length < all.length) {
          // The limit stops within this entry: resume at its next decision.
          yield* this.stop(decisions, { ...next(0), taken: taken + kept.length });
          return;
        }
        position = next(1);
        if (found >= query.limit) {
          yield* this.stop(decisions, position);
          return;
        }
      }
      if (decisions.length) yield decisions;
      if (page.length < PAGE_ENTRIES) {
        this.stoppedAt = null;
        return;
      }
      // A page whose entries the filter kept none of yields nothing to a paced consumer, and the
      // store's reads may settle at once (SQLite): the loop is given back between pages (found
      // 2026-11-29: a point no entry held walked 1,000,000 entries in one 3.8 s hold).
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** The last decisions, once the read knows where it stopped. */
  private *stop(decisions: RecordedDecision[], at: RecordedDecisionCursor | null): Generator<RecordedDecision[]> {
    this.stoppedAt = at;
    if (decisions.length) yield decisions;
  }
}
