/**
 * The latest recorded decision of every (tenant, client, decision point) seen in the retention
 * window, so that a policy change is tried on every client's traffic, not only on the newest
 * entries (seconds of a busy server's traffic, where a weekly batch job never appears). An index
 * of the audit log: one small document per (tenant, client, point) naming its latest audit entry,
 * written as entries are written (AuditLog.onWritten) through ProcessShares: the newest decision of
 * each key is written at the next flush (at most once a second per key, whatever the traffic), off
 * the request's path, and expires with the retention.
 */
import type { Logger } from '../log/index.js';
import type { RecordedDecision } from '../policy/index.js';
import { ProcessShares, type Store, type StoredDoc, type TenantCollection } from '../store/index.js';
import type { AuditEntry } from './entry.js';
import { decisionsOfEntry } from './recorded-decisions.js';
import { LATEST_DECISIONS_COLLECTION } from './collections.js';

/** One (tenant, client, point) and its latest audit entry. */
interface LatestDecision extends StoredDoc {
  id: string;
  tenantId: string | null;
  clientId: string | null;
  point: string;
  auditId: number;
  index: number | null;
  createdAt: string;
  expiresAt: number;
}

const DAY_MS = 24 * 3600_000;
const PAST_BOUND_SLACK = 64;

export class LatestDecisions {
  private readonly shares: ProcessShares<LatestDecision>;

  constructor(
    store: Store,
    private readonly entries: TenantCollection<AuditEntry>,
    private readonly retentionDays: number,
    log?: Logger,
  ) {
    this.shares = new ProcessShares(store, LATEST_DECISIONS_COLLECTION, log);
  }

  /** Notes the decisions of entries just written. */
  observe(stored: AuditEntry[]): void {
    for (const entry of stored) {
      for (const decision of decisionsOfEntry(entry)) {
        const id = JSON.stringify([decision.tenantId ?? null, decision.clientId ?? null, decision.point]);
        // The newest decision of the key replaces what waits for the next write.
        this.shares.changedShare(id, () => ({
          id,
          tenantId: decision.tenantId ?? null,
          clientId: decision.clientId ?? null,
          point: decision.point,
          auditId: decision.auditId,
          index: decision.index ?? null,
          createdAt: decision.time,
          expiresAt: Date.parse(decision.time) + this.retentionDays * DAY_MS,
        }));
      }
    }
  }

  /**
   * The latest decision of each (client, point), newest first, at most `limit`; of one tenant, or
   * of every tenant (`tenantId` undefined), optionally narrowed as a replay query is.
   */
  async decisions(
    limit: number,
    narrow: { tenantId?: string | null; point?: string; clientId?: string; from?: string; to?: string } = {},
  ): Promise<RecordedDecision[]> {
    const filter: Record<string, string | null> = {};
    if (narrow.tenantId !== undefined) filter.tenantId = narrow.tenantId;
    if (narrow.point !== undefined) filter.point = narrow.point;
    if (narrow.clientId !== undefined) filter.clientId = narrow.clientId;
    const newest = await this.shares.read(filter, {
      sort: { field: 'createdAt', direction: 'desc' },
      ...(narrow.to === undefined ? {} : { startAt: narrow.to }),
      // startAt is inclusive and `to` is not: a few more, for those at exactly `to`.
      limit: limit + PAST_BOUND_SLACK,
    });
    const latest = newest
      .filter(
        (each) =>
          (narrow.from === undefined || each.createdAt >= narrow.from) &&
          (narrow.to === undefined || each.createdAt < narrow.to),
      )
      .slice(0, limit);
    const entries = new Map(
      (await this.entries.getMany([...new Set(latest.map((each) => each.auditId))])).map((entry) => [entry.id, entry]),
    );
    return latest.flatMap((each) => {
      const entry = entries.get(each.auditId);
      // An entry purged by retention before its index document expired: nothing to replay.
      if (!entry) return [];
      const decision = decisionsOfEntry(entry).find(
        (candidate) => candidate.point === each.point && (candidate.index ?? null) === each.index,
      );
      return decision ? [decision] : [];
    });
  }

  close(): Promise<void> {
    return this.shares.close();
  }
}
