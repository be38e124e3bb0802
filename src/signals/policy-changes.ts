/**
 * Events from policy: once the revision in force moves on (a rule or data write, a shadow
 * promoted, on any node), the live access tokens' last introspection decisions are decided again
 * by the new revision, off the request path and paced as a replay is (POLICY_REPLAY_SHARE), and
 * the streams that cover them are told: CAEP `session-revoked` for a token now refused,
 * `token-claims-change` for one now granted less.
 *
 * Each node watches the revision; the one that sees it move appends a recheck to the outbox, so
 * that one node at a time (the lease holder of SIGNALS_POLICY_TOPIC) runs it, durably: a recheck
 * not finished when its node dies is run by the next holder. The revision last rechecked is kept
 * in the store, so that the same move seen by several nodes is rechecked once.
 */
import type { AdapterPayload } from 'oidc-provider';
import { liveAccessTokens } from '../../adapters/oidc/index.js';
import type { Logger } from '../log/index.js';
import { introspectionAsIssued, resourceOf } from '../oauth/index.js';
import type { Outbox } from '../outbox/index.js';
import type { Compared, PolicyLab, PolicySnapshot, RecordedDecision } from '../policy/index.js';
import { DEFAULT_TENANT, type Store, type StoredDoc } from '../store/index.js';
import { TENANTS_COLLECTION } from '../tenancy/index.js';
import { covers, EVENT_TYPES, ssfStreams } from './streams.js';
import { identifiersOf, type EventParty, type SignalEvent, type Transmitter } from './transmitter.js';
import { SSF_POLICY_RECHECKS_COLLECTION } from './collections.js';

/** The outbox topic of rechecks (one ordering key: they run in the order the revisions moved). */
export const SIGNALS_POLICY_TOPIC = 'ssf-policy';

const LAST_RECHECK = 'last';

interface RecheckRecord extends StoredDoc {
  id: string;
  revision: string;
  at: string;
}

/** The recorded decisions of one tenant's introspections since `from`, newest first, at most `limit`. */
export type IntrospectionDecisions = (query: {
  tenantId: string | null;
  from: string;
  limit: number;
}) => AsyncIterable<RecordedDecision[]>;

export interface PolicyChangeDeps {
  store: Store;
  outbox: Outbox;
  transmitter: Transmitter;
  lab: Pick<PolicyLab, 'layers' | 'redecide'>;
  decisions: IntrospectionDecisions;
  log: Logger;
  /** Tenants named in configuration (TENANTS): they may have streams without any Admin record. */
  configuredTenants: readonly string[];
  /** SIGNALS_POLICY_RECHECK_MAX: the most live tokens decided again per change, per tenant. */
  recheckMax: number;
  /** The longest an access token lives (ACCESS_TOKEN_TTL_SECONDS): older introspections are of expired tokens. */
  tokenLifetimeSeconds: number;
  /** How often a node reads the revision in force. */
  pollMs: number;
  /** ISSUER: a token bound to the tenant's own issuer is meant for no resource server in particular. */
  issuer: string;
}

/** Decisions read per live token at most, on average: a token introspected by many callers is read once per call. */
const DECISIONS_READ_PER_TOKEN = 10;

/** Which ones of a recheck's changes are signalled, and as what. */
const SIGNALLED: Partial<Record<NonNullable<Compared['kind']>, string>> = {
  allow_to_deny: EVENT_TYPES.sessionRevoked,
  narrower: EVENT_TYPES.tokenClaimsChange,
};

export class PolicyChangeSignals {
  private seen: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private watching: Promise<void> = Promise.resolve();

  constructor(private readonly deps: PolicyChangeDeps) {
    deps.outbox.handle(SIGNALS_POLICY_TOPIC, () => this.recheck());
  }

  /** Starts watching the revision in force (the one at start is taken as seen). */
  start(): void {
    const tick = () => {
      this.watching = this.watch()
        .catch((error: unknown) => this.deps.log.warn({ err: error }, 'the policy revision could not be read'))
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, this.deps.pollMs).unref();
        });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.watching;
  }

  private async watch(): Promise<void> {
    const { revision } = (await this.deps.lab.layers()).live;
    const previous = this.seen;
    this.seen = revision;
    if (previous === null || previous === revision) return;
    await this.deps.outbox.append([
      { topic: SIGNALS_POLICY_TOPIC, stream: SIGNALS_POLICY_TOPIC, payload: { revision } },
    ]);
  }

  /**
   * The outbox handler: the live tokens of every tenant with a stream decided again by the
   * revision in force now (a later move's entry then finds it rechecked already). A failure is
   * thrown: the outbox runs the recheck again with back-off.
   */
  private async recheck(): Promise<void> {
    if (this.deps.recheckMax === 0) return;
    const { live } = await this.deps.lab.layers();
    const rechecks = this.deps.store.collection<RecheckRecord>(SSF_POLICY_RECHECKS_COLLECTION, DEFAULT_TENANT);
    if ((await rechecks.get(LAST_RECHECK))?.revision === live.revision) return;
    const started = performance.now();
    let signalled = 0;
    for (const tenant of await this.tenantsWithStreams()) {
      const changed = await this.deps.lab.redecide(live, this.liveTokenDecisions(tenant));
      signalled += await this.deps.transmitter.emit(tenant, eventsOf(changed));
    }
    await rechecks.upsert({ id: LAST_RECHECK, revision: live.revision, at: new Date().toISOString() });
    this.deps.log.info(
      { revision: live.revision, sets: signalled, ms: Math.round(performance.now() - started) },
      'live tokens decided again by the policy in force',
    );
  }

  /**
   * What applying `candidate` would signal for `tenant` (impact analysis): the live tokens it
   * refuses or narrows, and the streams (receivers) that would be told. The same recheck, nothing emitted.
   */
  async preview(tenant: string, candidate: PolicySnapshot): Promise<{ liveTokens: number; receivers: number }> {
    if (this.deps.recheckMax === 0) return { liveTokens: 0, receivers: 0 };
    const streams = await ssfStreams(this.deps.store, tenant).find({}, { limit: 10_000 });
    if (streams.length === 0) return { liveTokens: 0, receivers: 0 };
    const changed = await this.deps.lab.redecide(candidate, this.liveTokenDecisions(tenant));
    const events = eventsOf(changed);
    const told = streams.filter((stream) =>
      events.some((event) => covers(stream, event.type, identifiersOf(event.party, stream.iss))),
    );
    const liveTokens = changed.filter(({ kind }) => kind !== null && SIGNALLED[kind] !== undefined).length;
    return { liveTokens, receivers: told.length };
  }

  private async tenantsWithStreams(): Promise<string[]> {
    const registered = await this.deps.store
      .collection<StoredDoc>(TENANTS_COLLECTION, DEFAULT_TENANT)
      .find({}, { limit: 100_000 });
    const tenants = new Set([
      DEFAULT_TENANT,
      ...this.deps.configuredTenants,
      ...registered.map((each) => String(each.id)),
    ]);
    const withStreams: string[] = [];
    for (const tenant of tenants)
      if ((await ssfStreams(this.deps.store, tenant).count({}, undefined, 1)) > 0) withStreams.push(tenant);
    return withStreams;
  }

  /**
   * Every live access token of the tenant (the store's token records: not expired, not revoked,
   * at most `recheckMax`), each with the input to decide it by: its latest recorded
   * introspection when there is one (the caller that asked last; skipped when that was refused:
   * refused before this change), else the input as issued (introspectionAsIssued: as if the
   * resource servers it was issued for asked), against what it was issued (allowed, its scopes).
   * No token value is recorded, so a token is known by its facts (keyOfIssued): tokens of one
   * client issued in the same second share them, and a decision recorded for one stands for each.
   */
  private async *liveTokenDecisions(tenant: string): AsyncGenerator<RecordedDecision[]> {
    const live = new Map<string, AdapterPayload[]>();
    for await (const page of liveAccessTokens(this.deps.store, tenant, this.deps.recheckMax))
      for (const payload of page) {
        const key = keyOfIssued(payload);
        const same = live.get(key);
        if (same) same.push(payload);
        else live.set(key, [payload]);
      }
    if (live.size === 0) return;
    const tenantId = tenant === DEFAULT_TENANT ? null : tenant;
    const now = Math.floor(Date.now() / 1000);
    const from = new Date((now - this.deps.tokenLifetimeSeconds) * 1000).toISOString();
    const limit = live.size * DECISIONS_READ_PER_TOKEN;
    for await (const page of this.deps.decisions({ tenantId, from, limit })) {
      const kept: RecordedDecision[] = [];
      for (const decision of page) {
        const key = keyOfRecorded(decision);
        if (key === null) continue;
        // Newest first: a token's first decision met is its latest; the older ones are passed over.
        const tokens = live.get(key);
        if (!tokens) continue;
        live.delete(key);
        if (decision.decision.allow === true) kept.push(...tokens.map(() => decision));
      }
      if (kept.length) yield kept;
      if (live.size === 0) return;
    }
    // Never introspected (or not within the decisions read): decided as issued.
    const issued = [...live.values()].flat();
    for (let at = 0; at < issued.length; at += ISSUED_PAGE) {
      const page = issued.slice(at, at + ISSUED_PAGE);
      yield await Promise.all(page.map((payload) => this.asIssued(tenant, tenantId, payload)));
    }
  }

  /** A never-introspected token as a recorded decision: the input as issued, allowed with its scopes. */
  private async asIssued(tenant: string, tenantId: string | null, payload: AdapterPayload): Promise<RecordedDecision> {
    const input = await introspectionAsIssued({ store: this.deps.store, issuer: this.deps.issuer }, tenant, payload);
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
    return {
      auditId: 0,
      time: new Date().toISOString(),
      tenantId,
      point: 'introspect',
      clientId: typeof payload.clientId === 'string' ? payload.clientId : null,
      subject: typeof payload.accountId === 'string' ? payload.accountId : null,
      input,
      decision: { point: 'introspect', allow: true, scopes },
    };
  }
}

/** Tokens decided as issued per page (each input costs a few store reads). */
const ISSUED_PAGE = 100;

/** A token's key: what a recorded introspection says of it (no token value is recorded), from the stored token. */
function keyOfIssued(payload: AdapterPayload): string {
  const token = { ...payload, isValid: true } as Parameters<typeof resourceOf>[0];
  return tokenKey(
    payload.clientId ?? null,
    payload.accountId ?? null,
    payload.iat,
    payload.exp,
    resourceOf(token),
    payload.jkt ?? null,
  );
}

/** The same key from a recorded introspection of an access token; null for another token type. */
function keyOfRecorded(decision: RecordedDecision): string | null {
  const token = (decision.input as { token?: TokenFacts } | null)?.token;
  if (!token || token.token_type !== 'access_token' || typeof token.client_id !== 'string') return null;
  return tokenKey(
    token.client_id,
    token.sub ?? null,
    token.iat,
    token.exp,
    token.resource ?? null,
    token.cnf_jkt ?? null,
  );
}

const tokenKey = (...facts: unknown[]) => JSON.stringify(facts);

interface TokenFacts {
  token_type?: unknown;
  client_id?: unknown;
  sub?: unknown;
  iat?: unknown;
  exp?: unknown;
  resource?: unknown;
  cnf_jkt?: unknown;
}

/** The party a token is about: its user, or its client for a machine token. */
function partyOf(decision: RecordedDecision): EventParty {
  const token = (decision.input as { token: TokenFacts }).token;
  return typeof token.sub === 'string' && token.sub !== ''
    ? { kind: 'user', sub: token.sub }
    : { kind: 'client', clientId: String(token.client_id) };
}

/** One event per party and type (a user's several tokens refused are one session revoked for a receiver). */
function eventsOf(changed: readonly Compared[]): SignalEvent[] {
  const events = new Map<string, SignalEvent>();
  const event_timestamp = Math.floor(Date.now() / 1000);
  for (const { recorded, after, kind } of changed) {
    const type = kind === null ? undefined : SIGNALLED[kind];
    if (!type) continue;
    const party = partyOf(recorded);
    const key = JSON.stringify([type, party]);
    if (events.has(key)) continue;
    const base = {
      event_timestamp,
      initiating_entity: 'policy',
      reason_admin: { en: `a policy change ${type === EVENT_TYPES.sessionRevoked ? 'refuses' : 'narrows'} the token` },
    };
    const claims = {
      ...(after.scopes ? { scope: after.scopes.join(' ') } : {}),
      ...(after.authorization_details ? { authorization_details: after.authorization_details } : {}),
    };
    events.set(key, { type, party, data: type === EVENT_TYPES.tokenClaimsChange ? { ...base, claims } : base });
  }
  return [...events.values()];
}
