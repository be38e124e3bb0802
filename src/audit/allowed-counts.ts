import type { AuditFields } from './entry.js';

/** (tenant, client, endpoint, method) tallies a node keeps at once; past it, they are all written at once. */
const MAX_TALLIES = 10_000;

interface Tally {
  tenantId: string | null;
  clientId: string | null;
  endpoint: string;
  method: string;
  count: number;
  statuses: Map<number, number>;
}

/**
 * The allowed requests of the endpoints of AUDIT_ALLOWED_COUNTED (successful introspection, say),
 * counted in memory per tenant, client, endpoint and method, and written as one aggregated entry
 * each per window: `requestSummary: { kind: 'aggregated', count, window, statuses }`, outcome
 * allow. As with refusals counted (RefusalBudget), a crash loses at most one window of counts; the
 * caller is answered without waiting for a write.
 */
export class AllowedCounts {
  private tallies = new Map<string, Tally>();
  private start = Date.now();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly windowMs: number,
    /** Writes an aggregated entry (the audit log's append; its failures are its own to report). */
    private readonly write: (entry: AuditFields) => void,
  ) {
    this.sweeper = setInterval(() => this.writeIfEnded(), Math.min(windowMs, 10_000));
    this.sweeper.unref();
  }

  count(entry: AuditFields): void {
    this.writeIfEnded();
    const key = JSON.stringify([entry.tenantId, entry.clientId, entry.endpoint, entry.method]);
    let tally = this.tallies.get(key);
    if (!tally) {
      if (this.tallies.size >= MAX_TALLIES) this.writeAll();
      const { tenantId, clientId, endpoint, method } = entry;
      tally = { tenantId, clientId, endpoint, method, count: 0, statuses: new Map() };
      this.tallies.set(key, tally);
    }
    tally.count += 1;
    const status = Number(entry.requestSummary.status);
    tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1);
  }

  /** Writes every count kept, and stops: for a stopping server, before the audit log closes. */
  close(): void {
    clearInterval(this.sweeper);
    this.writeAll();
  }

  private writeIfEnded(): void {
    if (Date.now() - this.start >= this.windowMs) this.writeAll();
  }

  private writeAll(): void {
    const end = Date.now();
    const window = { start: new Date(this.start).toISOString(), end: new Date(end).toISOString() };
    for (const tally of this.tallies.values())
      this.write({
        endpoint: tally.endpoint,
        method: tally.method,
        requestSummary: {
          kind: 'aggregated',
          count: tally.count,
          window,
          statuses: Object.fromEntries(tally.statuses),
        },
        policyInput: null,
        policyDecision: null,
        outcome: 'allow',
        tenantId: tally.tenantId,
        clientId: tally.clientId,
        subjectId: null,
        ip: null,
        userAgent: null,
        requestId: null,
      });
    this.tallies = new Map();
    this.start = end;
  }
}
