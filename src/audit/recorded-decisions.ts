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
 * The query's decisions, a page at a time, newest first (by createdAt, as the audit log lists
 * entries). Pages are read by keyset (each starts at the createdAt the previous one ended at, past
 * the entries of that instant already read), so the 400th page costs what the first does; entries
 * written meanwhile are newer than the first page and never shift the others.
 */
export async function* recordedDecisionPages(
  entries: TenantCollection<AuditEntry>,
  query: RecordedDecisionQuery,
): AsyncGenerator<RecordedDecision[]> {
  const filter: Filter = { tenantId: query.tenantId };
  if (query.clientId !== undefined) filter.clientId = query.clientId;
  const sort = { field: 'createdAt', direction: 'desc' } as const;
  let bound = query.to;
  /** Entries at exactly `bound` already read (they come first in the next page). */
  let atBound = 0;
  let found = 0;
  while (found < query.limit) {
    const page = await entries.find(filter, {
      sort,
      ...(bound === undefined ? {} : { startAt: bound }),
      skip: atBound,
      limit: PAGE_ENTRIES,
    });
    const decisions: RecordedDecision[] = [];
    let older = false;
    for (const entry of page) {
      if (query.to !== undefined && entry.createdAt >= query.to) continue;
      if (query.from !== undefined && entry.createdAt < query.from) {
        older = true;
        break;
      }
      for (const decision of decisionsOfEntry(entry)) {
        if (query.point !== undefined && decision.point !== query.point) continue;
        if (found >= query.limit) break;
        decisions.push(decision);
        found += 1;
      }
    }
    if (decisions.length) yield decisions;
    if (older || page.length < PAGE_ENTRIES) return;
    const last = page[page.length - 1].createdAt;
    const atLast = page.filter((entry) => entry.createdAt === last).length;
    atBound = (last === bound ? atBound : 0) + atLast;
    bound = last;
  }
}
