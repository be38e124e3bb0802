/**
 * What the console's overview shows of the last hour: decisions per minute by point and outcome,
 * and the clients and points with the most denials, per tenant. Counted from the audit entries as
 * they are written (AuditLog.onWritten), in memory: each node counts its own traffic, and a
 * restart starts afresh (the audit log itself keeps everything).
 */
import { isAdminPath } from '../http/admin-path.js';
import type { AuditEntry } from './entry.js';
import { eachRecorded } from './recorded.js';

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
  /** When this node started counting (the window may reach back before it). */
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
  /** Per tenant ('' for the default one), per minute number. */
  private readonly tenants = new Map<string, Map<number, Bucket>>();
  private readonly since = new Date().toISOString();

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
    }
  }

  /** One tenant's last `minutes` minutes (at most ACTIVITY_MINUTES), up to now. */
  summary(tenantId: string | null, minutes = ACTIVITY_MINUTES, top = 5): ActivitySummary {
    const now = Math.floor(Date.now() / MINUTE_MS);
    const span = Math.min(Math.max(minutes, 1), ACTIVITY_MINUTES);
    const buckets = this.tenants.get(tenantId ?? '') ?? new Map<number, Bucket>();
    const window: ActivityMinute[] = [];
    const clients = new Map<string, { denials: number; decisions: number }>();
    const points = new Map<string, { denials: number; decisions: number }>();
    for (let minute = now - span + 1; minute <= now; minute++) {
      const bucket = buckets.get(minute);
      window.push({
        at: new Date(minute * MINUTE_MS).toISOString(),
        byPoint: Object.fromEntries([...(bucket?.points ?? [])].map(([point, counts]) => [point, { ...counts }])),
      });
      for (const [clientId, counts] of bucket?.clients ?? []) add(clients, clientId, counts);
      for (const [point, counts] of bucket?.points ?? [])
        add(points, point, { denials: counts.deny, decisions: counts.allow + counts.deny + counts.error });
    }
    const ranked = <T extends { denials: number }>(list: T[]) =>
      list
        .filter((item) => item.denials > 0)
        .sort((a, b) => b.denials - a.denials)
        .slice(0, top);
    return {
      minutes: window,
      deniedClients: ranked([...clients].map(([clientId, counts]) => ({ clientId, ...counts }))),
      deniedPoints: ranked([...points].map(([point, counts]) => ({ point, ...counts }))),
      countingSince: this.since,
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
