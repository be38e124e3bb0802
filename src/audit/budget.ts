import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';
import type { AuditFields } from './entry.js';

export interface RefusalBudgetLimits {
  /** Refused unauthenticated requests of one address written one entry each per window; the rest are counted. */
  perWindow: number;
  windowSeconds: number;
  /** Addresses followed at once; the least recently seen goes first, its count written then. */
  maxAddresses?: number;
}

/** What an aggregated entry keeps of the requests it counts, each list bounded. */
interface Tally {
  count: number;
  endpoints: Map<string, number>;
  methods: Set<string>;
  statuses: Map<number, number>;
  /** Tenant ids named that do not exist: a few, to show what was tried. */
  unknownTenants: Set<string>;
}

interface AddressWindow {
  start: number;
  written: number;
  /** One tally per tenant the requests named (null: the default tenant, or one that does not exist). */
  tallies: Map<string | null, Tally>;
}

const DEFAULT_MAX_ADDRESSES = 10_000;
const MAX_ENDPOINTS = 10;
const MAX_UNKNOWN_TENANTS = 10;
const OTHER_ENDPOINTS = '(other)';

/**
 * How refused requests of callers nobody authenticated (4xx, no credential accepted, no policy
 * decision) reach the audit log: the first `perWindow` of an address each get their entry; after
 * that, and for every request naming a tenant that does not exist, they are counted in memory and
 * written as one aggregated entry per address (and tenant) per window, whose requestSummary is
 * `{ kind: 'aggregated', count, address, window, endpoints, statuses }`. So a flood from one
 * address costs a few rows a window, however many requests it sends. An IPv6 caller is one /64.
 *
 * The counts are in memory: a crash loses at most one window of them (the entries of
 * authenticated requests and of decisions are never counted, always written before the answer).
 */
export class RefusalBudget {
  private readonly windows: LRUCache<string, AddressWindow>;
  private readonly windowMs: number;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly limits: RefusalBudgetLimits,
    /** Writes an aggregated entry (the audit log's append; its failures are its own to report). */
    private readonly write: (entry: AuditFields) => void,
  ) {
    this.windowMs = limits.windowSeconds * 1000;
    this.windows = new LRUCache({
      max: limits.maxAddresses ?? DEFAULT_MAX_ADDRESSES,
      // An address pushed out of memory has its count written now rather than lost.
      dispose: (window, address, reason) => {
        if (reason === 'evict') this.writeTallies(address, window);
      },
    });
    this.sweeper = setInterval(() => this.writeEndedWindows(), Math.min(this.windowMs, 10_000));
    this.sweeper.unref();
  }

  /** True when this refused request gets its own entry; false when it was counted instead. */
  admit(entry: AuditFields, unknownTenant: boolean): boolean {
    const address = callerAddress(entry.ip);
    const window = this.currentWindow(address);
    if (!unknownTenant && window.written < this.limits.perWindow) {
      window.written += 1;
      return true;
    }
    count(window, entry, unknownTenant);
    return false;
  }

  /** Writes every count kept, and stops: for a stopping server, before the audit log closes. */
  close(): void {
    clearInterval(this.sweeper);
    for (const [address, window] of this.windows.entries()) this.writeTallies(address, window);
    this.windows.clear();
  }

  private currentWindow(address: string): AddressWindow {
    const now = Date.now();
    const known = this.windows.get(address);
    if (known && now - known.start < this.windowMs) return known;
    if (known) this.writeTallies(address, known);
    const fresh: AddressWindow = { start: now, written: 0, tallies: new Map() };
    this.windows.set(address, fresh);
    return fresh;
  }

  private writeEndedWindows(): void {
    const now = Date.now();
    const ended = [...this.windows.entries()].filter(([, window]) => now - window.start >= this.windowMs);
    for (const [address, window] of ended) {
      this.windows.delete(address);
      this.writeTallies(address, window);
    }
  }

  private writeTallies(address: string, window: AddressWindow): void {
    for (const [tenantId, tally] of window.tallies)
      this.write(aggregatedEntry(address, tenantId, window, tally, this.windowMs));
    window.tallies.clear();
  }
}

function count(window: AddressWindow, entry: AuditFields, unknownTenant: boolean): void {
  const tenantId = unknownTenant ? null : entry.tenantId;
  let tally = window.tallies.get(tenantId);
  if (!tally) {
    tally = { count: 0, endpoints: new Map(), methods: new Set(), statuses: new Map(), unknownTenants: new Set() };
    window.tallies.set(tenantId, tally);
  }
  tally.count += 1;
  const endpoint =
    tally.endpoints.has(entry.endpoint) || tally.endpoints.size < MAX_ENDPOINTS ? entry.endpoint : OTHER_ENDPOINTS;
  tally.endpoints.set(endpoint, (tally.endpoints.get(endpoint) ?? 0) + 1);
  if (tally.methods.size < MAX_ENDPOINTS) tally.methods.add(entry.method);
  const status = Number(entry.requestSummary.status);
  tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1);
  if (unknownTenant && entry.tenantId && tally.unknownTenants.size < MAX_UNKNOWN_TENANTS)
    tally.unknownTenants.add(entry.tenantId);
}

function aggregatedEntry(
  address: string,
  tenantId: string | null,
  window: AddressWindow,
  tally: Tally,
  windowMs: number,
): AuditFields {
  const [onlyEndpoint] = tally.endpoints.size === 1 ? tally.endpoints.keys() : ['*'];
  const [onlyMethod] = tally.methods.size === 1 ? tally.methods : ['*'];
  return {
    endpoint: onlyEndpoint,
    method: onlyMethod,
    requestSummary: {
      kind: 'aggregated',
      count: tally.count,
      address,
      window: { start: new Date(window.start).toISOString(), end: new Date(window.start + windowMs).toISOString() },
      endpoints: Object.fromEntries(tally.endpoints),
      statuses: Object.fromEntries(tally.statuses),
      ...(tally.unknownTenants.size > 0 ? { unknownTenantIds: [...tally.unknownTenants] } : {}),
    },
    policyInput: null,
    policyDecision: null,
    outcome: 'deny',
    tenantId,
    clientId: null,
    subjectId: null,
    ip: address,
    userAgent: null,
    requestId: null,
  };
}

/**
 * The caller an address stands for: an IPv4 address (also written IPv4-mapped), or the /64 of an
 * IPv6 address, which one subscriber usually holds whole (RFC 6177) and could otherwise spend
 * one address per request of. Parsed by ipaddr.js, as the forwarded-header code does.
 */
export function callerAddress(ip: string | null): string {
  if (!ip) return 'unknown';
  if (!ipaddr.isValid(ip)) return ip;
  const address = ipaddr.process(ip);
  if (address.kind() === 'ipv4') return address.toString();
  return `${(address as ipaddr.IPv6).parts
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}
