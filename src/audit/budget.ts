import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';
import type { AuditFields } from './entry.js';

export interface RefusalBudgetLimits {
  /** Refused unauthenticated requests of one address written one entry each per window; the rest are counted. */
  perWindow: number;
  /**
   * Rows (entries and per-address aggregated entries) all addresses together get per window on
   * this node; beyond it, refusals are counted in one node-wide entry per tenant. None: no cap.
   */
  totalPerWindow?: number;
  windowSeconds: number;
  /** Addresses followed at once; the least recently seen goes first, its count written then. */
  maxAddresses?: number;
}

/** What an aggregated entry keeps of the requests it counts, each list bounded. */
interface Tally {
  count: number;
  /** Some request counted was refused (a 4xx, an authorization error); else all were allowed. */
  refused: boolean;
  endpoints: Map<string, number>;
  methods: Set<string>;
  statuses: Map<number, number>;
  /** Tenant ids named that do not exist: a few, to show what was tried. */
  unknownTenants: Set<string>;
  /** Of a node-wide tally: a few of the addresses it counts. */
  addresses: Set<string>;
}

/** One tally per tenant the requests named (null: the default tenant, or one that does not exist). */
type Tallies = Map<string | null, Tally>;

interface AddressWindow {
  start: number;
  written: number;
  tallies: Tallies;
}

/** This node's rows of the window, all addresses together, and what was counted once they were spent. */
interface NodeWindow {
  start: number;
  rows: number;
  tallies: Tallies;
}

const DEFAULT_MAX_ADDRESSES = 10_000;
const MAX_ENDPOINTS = 10;
const MAX_UNKNOWN_TENANTS = 10;
const MAX_ADDRESS_SAMPLE = 10;
const OTHER_ENDPOINTS = '(other)';
/** The address of a node-wide aggregated entry: it counts the refusals of many. */
const ANY_ADDRESS = '*';

/**
 * How requests of callers nobody authenticated (no credential accepted, no policy decision),
 * refused (a 4xx, an authorization error) or allowed (a browser's first GET /authorize), reach
 * the audit log: the first `perWindow` of an address each get their entry; after
 * that, and for every request naming a tenant that does not exist, they are counted in memory and
 * written as one aggregated entry per address (and tenant) per window, whose requestSummary is
 * `{ kind: 'aggregated', count, address, window, endpoints, statuses }`. So a flood from one
 * address costs a few rows a window, however many requests it sends. An IPv6 caller is one /64.
 *
 * A flood from many addresses (all of 127/8, an IPv6 /48, a botnet) is bounded by the node's
 * `totalPerWindow`: the entries and per-address aggregated entries of all addresses together
 * count against it, and once it is spent the further refusals are counted in one node-wide
 * aggregated entry per tenant (address `*`, by endpoint and status, with a sample of addresses).
 * So a window writes at most `totalPerWindow` rows plus one per tenant, whatever the addresses.
 *
 * The counts are in memory: a crash loses at most one window of them (the entries of
 * authenticated requests and of decisions are never counted, always written before the answer).
 */
export class RefusalBudget {
  private readonly windows: LRUCache<string, AddressWindow>;
  private readonly windowMs: number;
  private readonly sweeper: NodeJS.Timeout;
  private node: NodeWindow = { start: Date.now(), rows: 0, tallies: new Map() };

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
    const node = this.currentNodeWindow();
    if (!unknownTenant && window.written < this.limits.perWindow && this.takeRow(node)) {
      window.written += 1;
      return true;
    }
    const tenantId = unknownTenant ? null : entry.tenantId;
    // A new per-address aggregated entry is a row too; past the node's budget, the node-wide one counts it.
    const tally = window.tallies.has(tenantId) || this.takeRow(node) ? tallyOf(window.tallies, tenantId) : null;
    count(tally ?? tallyOf(node.tallies, tenantId), entry, unknownTenant, address);
    return false;
  }

  /** Writes every count kept, and stops: for a stopping server, before the audit log closes. */
  close(): void {
    clearInterval(this.sweeper);
    for (const [address, window] of this.windows.entries()) this.writeTallies(address, window);
    this.windows.clear();
    this.writeTallies(ANY_ADDRESS, this.node);
  }

  private takeRow(node: NodeWindow): boolean {
    if (this.limits.totalPerWindow !== undefined && node.rows >= this.limits.totalPerWindow) return false;
    node.rows += 1;
    return true;
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

  private currentNodeWindow(): NodeWindow {
    const now = Date.now();
    if (now - this.node.start >= this.windowMs) {
      this.writeTallies(ANY_ADDRESS, this.node);
      this.node = { start: now, rows: 0, tallies: new Map() };
    }
    return this.node;
  }

  private writeEndedWindows(): void {
    const now = Date.now();
    const ended = [...this.windows.entries()].filter(([, window]) => now - window.start >= this.windowMs);
    for (const [address, window] of ended) {
      this.windows.delete(address);
      this.writeTallies(address, window);
    }
    this.currentNodeWindow();
  }

  private writeTallies(address: string, window: AddressWindow | NodeWindow): void {
    for (const [tenantId, tally] of window.tallies)
      this.write(aggregatedEntry(address, tenantId, window.start, tally, this.windowMs));
    window.tallies.clear();
  }
}

function tallyOf(tallies: Tallies, tenantId: string | null): Tally {
  let tally = tallies.get(tenantId);
  if (!tally) {
    tally = {
      count: 0,
      refused: false,
      endpoints: new Map(),
      methods: new Set(),
      statuses: new Map(),
      unknownTenants: new Set(),
      addresses: new Set(),
    };
    tallies.set(tenantId, tally);
  }
  return tally;
}

function count(tally: Tally, entry: AuditFields, unknownTenant: boolean, address: string): void {
  tally.count += 1;
  if (entry.outcome !== 'allow') tally.refused = true;
  const endpoint =
    tally.endpoints.has(entry.endpoint) || tally.endpoints.size < MAX_ENDPOINTS ? entry.endpoint : OTHER_ENDPOINTS;
  tally.endpoints.set(endpoint, (tally.endpoints.get(endpoint) ?? 0) + 1);
  if (tally.methods.size < MAX_ENDPOINTS) tally.methods.add(entry.method);
  const status = Number(entry.requestSummary.status);
  tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1);
  if (unknownTenant && entry.tenantId && tally.unknownTenants.size < MAX_UNKNOWN_TENANTS)
    tally.unknownTenants.add(entry.tenantId);
  if (tally.addresses.size < MAX_ADDRESS_SAMPLE) tally.addresses.add(address);
}

function aggregatedEntry(
  address: string,
  tenantId: string | null,
  start: number,
  tally: Tally,
  windowMs: number,
): AuditFields {
  const [onlyEndpoint = '*'] = tally.endpoints.size === 1 ? tally.endpoints.keys() : [];
  const [onlyMethod = '*'] = tally.methods.size === 1 ? tally.methods : [];
  const nodeWide = address === ANY_ADDRESS;
  return {
    endpoint: onlyEndpoint,
    method: onlyMethod,
    requestSummary: {
      kind: 'aggregated',
      count: tally.count,
      address,
      window: { start: new Date(start).toISOString(), end: new Date(start + windowMs).toISOString() },
      endpoints: Object.fromEntries(tally.endpoints),
      statuses: Object.fromEntries(tally.statuses),
      ...(tally.unknownTenants.size > 0 ? { unknownTenantIds: [...tally.unknownTenants] } : {}),
      ...(nodeWide ? { addressSample: [...tally.addresses] } : {}),
    },
    policyInput: null,
    policyDecision: null,
    // Refusals, unless every request it counts was allowed (a browser's first GET /authorize).
    outcome: tally.refused ? 'deny' : 'allow',
    tenantId,
    clientId: null,
    subjectId: null,
    ip: nodeWide ? null : address,
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
