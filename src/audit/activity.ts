/**
 * What the console's overview shows of the last hour: decisions per minute by point and outcome,
 * and the clients and points with the most denials, per tenant. Counted from the audit entries as
 * they are written (AuditLog.onWritten): each process counts its own traffic per minute and keeps
 * that share in the store (ProcessShares), and a summary sums the shares of every worker and node,
 * so every one of them answers the same, and a restart loses nothing.
 */
import { isAdminPath } from '../http/admin-path.js';
import type { Logger } from '../log/index.js';
import { PROCESS_ID, ProcessShares, type Store, type StoredDoc } from '../store/index.js';
import type { AuditEntry } from './entry.js';
import { eachRecorded } from './recorded.js';
import { ACTIVITY_COLLECTION } from './collections.js';

/** One process's counts of one tenant's minute. */
interface ActivityShare extends StoredDoc {
  tenantId: string | null;
  minute: number;
  since: string;
  points: Record<string, Record<ActivityOutcome, number>>;
  clients: Record<string, { denials: number; decisions: number }>;
  expiresAt: number;
}

export type ActivityOutcome = 'allow' | 'deny' | 'error';

/** One minute of one tenant's decisions: per point, per outcome. */
export interface ActivityMinute {
  /** The minute's start, ISO 8601. */
  at: string;
  byPoint: Record<string, Record<ActivityOutcome, number>>;
}

export interface ActivitySummary {
  /** The minutes of the window, oldest first, every minute present (empty ones too). */
  minutes: ActivityMinute[];
  /** The clients with the most denied decisions in the window, most first. */
  deniedClients: { clientId: string; denials: number; decisions: number }[];
  /** The points with the most denied decisions in the window, most first. */
  deniedPoints: { point: string; denials: number; decisions: number }[];
  /** When the first process whose counts are in the window started counting (the window may reach back before it). */
  countingSince: string;
}

const MINUTE_MS = 60_000;
/** Minutes kept. */
export const ACTIVITY_MINUTES = 60;
/** Clients counted per tenant and minute; beyond, the rest are counted as one. */
const CLIENTS_PER_MINUTE = 1000;
const OTHER_CLIENTS = '(other clients)';

interface Bucket {
  minute: number;
  points: Map<string, Record<ActivityOutcome, number>>;
  clients: Map<string, { denials: number; decisions: number }>;
}

export class RecentActivity {
  /** This process's counts, per tenant ('' for the default one), per minute number. */
  private readonly tenants = new Map<string, Map<number, Bucket>>();
  private readonly since = new Date().toISOString();
  private readonly shares: ProcessShares<ActivityShare>;

  constructor(store: Store, log?: Logger) {
    this.shares = new ProcessShares(store, ACTIVITY_COLLECTION, log);
  }

  /** Counts the decisions of entries just written (decisions asked at the Admin API are not traffic). */
  observe(entries: AuditEntry[]): void {
    for (const entry of entries) {
      if (isAdminPath(entry.endpoint)) continue;
      const decisions = eachRecorded(entry.policyDecision);
      if (!decisions) continue;
      const minute = Math.floor(Date.parse(entry.createdAt) / MINUTE_MS);
      const bucket = this.bucket(entry.tenantId ?? '', minute);
      for (const decision of decisions as { point?: unknown; allow?: unknown; engineError?: unknown }[]) {
        if (typeof decision?.point !== 'string') continue;
        const outcome: ActivityOutcome = decision.engineError ? 'error' : decision.allow === true ? 'allow' : 'deny';
        const counts = bucket.points.get(decision.point) ?? { allow: 0, deny: 0, error: 0 };
        counts[outcome] += 1;
        bucket.points.set(decision.point, counts);
        const client = this.clientOf(bucket, entry.clientId ?? '(none)');
        client.decisions += 1;
        if (outcome === 'deny') client.denials += 1;
      }
      this.shares.changedShare(`${entry.tenantId ?? ''}:${minute}:${PROCESS_ID}`, () =>
        this.shareOf(entry.tenantId ?? null, bucket),
      );
    }
  }

  /** Writes this process's counts; for a stopping server, before its store closes. */
  close(): Promise<void> {
    return this.shares.close();
  }

  /** One tenant's last `minutes` minutes (at most ACTIVITY_MINUTES), up to now, summed over every process. */
  async summary(tenantId: string | null, minutes = ACTIVITY_MINUTES, top = 5): Promise<ActivitySummary> {
    const now = Math.floor(Date.now() / MINUTE_MS);
    const span = Math.min(Math.max(minutes, 1), ACTIVITY_MINUTES);
    const first = now - span + 1;
    const shares = await this.shares.read(
      { tenantId },
      { sort: { field: 'minute', direction: 'asc' }, startAt: first },
    );
    const byMinute = new Map<number, Record<string, Record<ActivityOutcome, number>>>();
    const clients = new Map<string, { denials: number; decisions: number }>();
    const points = new Map<string, { denials: number; decisions: number }>();
    let since = this.since;
    for (const share of shares) {
      if (share.minute > now) continue;
      if (share.since < since) since = share.since;
      const minute = byMinute.get(share.minute) ?? {};
      byMinute.set(share.minute, minute);
      for (const [point, counts] of Object.entries(share.points)) {
        const sum = (minute[point] ??= { allow: 0, deny: 0, error: 0 });
        for (const outcome of ['allow', 'deny', 'error'] as const) sum[outcome] += counts[outcome];
        add(points, point, { denials: counts.deny, decisions: counts.allow + counts.deny + counts.error });
      }
      for (const [clientId, counts] of Object.entries(share.clients)) add(clients, clientId, counts);
    }
    const window: ActivityMinute[] = [];
    for (let minute = first; minute <= now; minute++)
      window.push({ at: new Date(minute * MINUTE_MS).toISOString(), byPoint: byMinute.get(minute) ?? {} });
    const ranked = <T extends { denials: number }>(list: T[]) =>
      list
        .filter((item) => item.denials > 0)
        .sort((a, b) => b.denials - a.denials)
        .slice(0, top);
    return {
      minutes: window,
      deniedClients: ranked([...clients].map(([clientId, counts]) => ({ clientId, ...counts }))),
      deniedPoints: ranked([...points].map(([point, counts]) => ({ point, ...counts }))),
      countingSince: since,
    };
  }

  private shareOf(tenantId: string | null, bucket: Bucket): ActivityShare {
    return {
      id: `${tenantId ?? ''}:${bucket.minute}:${PROCESS_ID}`,
      tenantId,
      minute: bucket.minute,
      since: this.since,
      points: Object.fromEntries([...bucket.points].map(([point, counts]) => [point, { ...counts }])),
      clients: Object.fromEntries([...bucket.clients].map(([clientId, counts]) => [clientId, { ...counts }])),
      // Kept as long as the window can show the minute.
      expiresAt: (bucket.minute + ACTIVITY_MINUTES + 1) * MINUTE_MS,
    };
  }

  private bucket(tenant: string, minute: number): Bucket {
    let buckets = this.tenants.get(tenant);
    if (!buckets) this.tenants.set(tenant, (buckets = new Map()));
    let bucket = buckets.get(minute);
    if (!bucket) {
      buckets.set(minute, (bucket = { minute, points: new Map(), clients: new Map() }));
      // Minutes older than the window go as new ones come.
      for (const old of buckets.keys()) if (old <= minute - ACTIVITY_MINUTES) buckets.delete(old);
    }
    return bucket;
  }

  private clientOf(bucket: Bucket, clientId: string): { denials: number; decisions: number } {
    const key = bucket.clients.has(clientId) || bucket.clients.size < CLIENTS_PER_MINUTE ? clientId : OTHER_CLIENTS;
    let counts = bucket.clients.get(key);
    if (!counts) bucket.clients.set(key, (counts = { denials: 0, decisions: 0 }));
    return counts;
  }
}

function add(
  table: Map<string, { denials: number; decisions: number }>,
  key: string,
  counts: { denials: number; decisions: number },
): void {
  const known = table.get(key) ?? { denials: 0, decisions: 0 };
  table.set(key, { denials: known.denials + counts.denials, decisions: known.decisions + counts.decisions });
}
