import type { EventEmitter } from 'node:events';
import type Provider from 'oidc-provider';
import { signedInSessions } from '../../../adapters/oidc/index.js';
import { auditFactsOf } from '../../audit/index.js';
import { shownUrl } from '../../http/outbound.js';
import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import { tenantOf, type Tenant } from '../../tenancy/index.js';
import type { ConfigurationSlice, LogoutRetries } from '../context.js';
import type { ArbiterContext } from '../state.js';

/**
 * OIDC Back-Channel Logout 1.0: a client that registers `backchannel_logout_uri` is posted a
 * logout token (signed with the tenant's keys, under the issuer it signed the user in with) when
 * the user's session ends: at /session/end (oidc-provider posts them), and when an operator
 * revokes a subject's tokens or deletes the subject (tellClientsOfLogout). Every post goes
 * through the outbound guard (outbound-fetch.ts) with its timeout and address checks. A post that
 * fails is tried once in the request, then kept in the durable outbox (LogoutRetries) and tried
 * again with its back-off, one stream per client, until it is delivered or too old
 * (BACKCHANNEL_LOGOUT_RETRY_MAX_SECONDS).
 */
export const backchannelLogout: ConfigurationSlice = () => ({
  features: { backchannelLogout: { enabled: true } },
});

/** How many logout tokens a change delivered, and how many were not delivered at once (kept for later when `kept`). */
export interface LogoutNotices {
  delivered: number;
  failed: number;
  /** Of `failed`: how many are kept to be delivered later (LogoutRetries). */
  kept: number;
}

/** The outbox topic of logout tokens not delivered at once. */
export const BACKCHANNEL_LOGOUT_TOPIC = 'backchannel-logout';

/**
 * A logout token not delivered at once, as the outbox keeps it: whom to tell of which session,
 * under which issuer. No token is kept: a fresh one (new `jti` and `iat`, same claims) is signed at
 * each attempt with the keys then current, so that its `iat` is one the client accepts however
 * late it arrives. Nothing in it is secret (a subject id, a session id, a client id).
 */
export interface UndeliveredLogout {
  tenant: string;
  tenantId: string | null;
  /** '' or `/t/<tenant>`: the issuer the session was made under. */
  issuerPath: string;
  clientId: string;
  sub: string;
  sid: string;
}

/** One ordering key per client of a tenant: a client that is down holds no other client's logouts up. */
function streamOf(logout: UndeliveredLogout): string {
  return `${BACKCHANNEL_LOGOUT_TOPIC}:${logout.tenant}:${logout.clientId}`;
}

/** The retries of each provider's tenant (set by reportBackchannelLogouts): tellClientsOfLogout finds them with the provider. */
const retriesOfProvider = new WeakMap<Provider, LogoutRetries>();

/** What each /session/end still has to store before its answer goes out (logoutsKept). */
const keeping = new WeakMap<object, Promise<unknown>[]>();

/**
 * The deliveries oidc-provider makes at /session/end, counted in the request's audit entry; a
 * failed one is kept in `retries` (the outbox), stored before the logout is answered (logoutsKept),
 * and logged with its client.
 */
export function reportBackchannelLogouts(
  provider: Provider,
  log: Logger,
  retries: LogoutRetries | undefined,
  basePath: string,
): void {
  if (retries) retriesOfProvider.set(provider, retries);
  // Provider is an EventEmitter; its typings name neither event.
  const events = provider as unknown as EventEmitter;
  events.on('backchannel.success', (ctx: ArbiterContext) => count(ctx, 'Delivered'));
  events.on(
    'backchannel.error',
    (ctx: ArbiterContext, error: Error, client: LogoutClient, accountId: string, sid: string) => {
      count(ctx, 'Failed');
      log.warn(
        { clientId: client.clientId, reason: whyNotDelivered(client, error), kept: Boolean(retries) },
        'back-channel logout not delivered',
      );
      if (!retries) return;
      const { name, id } = ctx.state.tenant;
      const kept = keep(retries, [
        { tenant: name, tenantId: id, issuerPath: basePath, clientId: client.clientId, sub: accountId, sid },
      ]);
      // Awaited by logoutsKept; never a rejection left unhandled should that step not run.
      kept.catch(() => undefined);
      keeping.set(ctx, [...(keeping.get(ctx) ?? []), kept]);
    },
  );
}

/** Resolves once the logout tokens /session/end could not deliver are stored for later (its answer waits for it). */
export async function logoutsKept(ctx: object): Promise<void> {
  await Promise.all(keeping.get(ctx) ?? []);
}

/**
 * The outbox handler of BACKCHANNEL_LOGOUT_TOPIC: signs a fresh logout token for the kept logout
 * and posts it (through the outbound guard); throws to be tried again. A client deleted meanwhile,
 * or that no longer has a back-channel logout URI, is told nothing.
 */
export function deliverKeptLogout(
  providerOf: (tenant: Tenant) => Promise<Provider>,
): (entry: { payload: unknown }) => Promise<void> {
  return async (entry) => {
    const logout = entry.payload as UndeliveredLogout;
    const provider = await providerOf({
      name: logout.tenant,
      id: logout.tenantId,
      ...(logout.issuerPath ? { path: logout.issuerPath } : {}),
    });
    const client = (await provider.Client.find(logout.clientId)) as unknown as LogoutClient | undefined;
    if (!client?.backchannelLogoutUri) return;
    await client.backchannelLogout(logout.sub, logout.sid).catch((error: unknown) => {
      throw new Error(whyNotDelivered(client, error));
    });
  };
}

/**
 * Why a logout was not delivered, as the log and the outbox's `lastError` say it: oidc-provider's
 * message quotes the client's whole back-channel logout URI, whose query may hold a credential
 * (found 2026-11-30), so the URI is shown as its origin and path, as SSF push URLs are.
 */
function whyNotDelivered(client: LogoutClient, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const uri = client.backchannelLogoutUri;
  return uri ? message.replaceAll(uri, shownUrl(uri)) : message;
}

/** Appends `logouts` to the outbox, each to its client's stream. */
function keep(retries: LogoutRetries, logouts: UndeliveredLogout[]): Promise<void> {
  return retries.append(
    logouts.map((logout) => ({ topic: BACKCHANNEL_LOGOUT_TOPIC, stream: streamOf(logout), payload: logout })),
  );
}

/** The part of oidc-provider's Client a logout needs. */
interface LogoutClient {
  clientId: string;
  backchannelLogoutUri?: string;
  backchannelLogout(sub: string, sid: string): Promise<void>;
}

function count(ctx: ArbiterContext, outcome: 'Delivered' | 'Failed'): void {
  const result = (auditFactsOf(ctx.state).result ??= {});
  const key = `backchannelLogout${outcome}`;
  result[key] = String(Number(result[key] ?? 0) + 1);
}

/** Logout tokens posted at once: a user of many sessions (each a browser) has a delivery for each client of each. */
const DELIVERIES_AT_ONCE = 8;

/**
 * How long a change tells clients itself: deliveries not begun by then are kept for the outbox at
 * once, since the caller revokes the user's tokens only after (found 2026-11-29: 8 at a time, each
 * up to the outbound timeout, 10,000 sessions would have held a revocation for over an hour).
 */
const TELLING_MS = 10_000;

/** Runs the tasks, at most `atOnce` of them at a time, each told whether it begins past `deadline`; their results in order. */
async function inTurnsOf<T>(atOnce: number, deadline: number, tasks: ((late: boolean) => Promise<T>)[]): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++;
      results[index] = await tasks[index]!(Date.now() > deadline);
    }
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, tasks.length) }, worker));
  return results;
}

/**
 * Posts a logout token to every client of every session `accountId` has in the tenant
 * (`tenantId`, null: the default), each under the issuer the session was made under, before
 * those sessions are revoked. Each is tried once (bounded by the outbound guard's timeout); one
 * that fails is kept in the provider's LogoutRetries (the outbox) to be delivered later, stored
 * before this resolves.
 */
export async function tellClientsOfLogout(
  providerOf: (tenant: Tenant) => Promise<Provider>,
  store: Store,
  tenantId: string | null,
  accountId: string,
  log: Logger,
  tellingMs = TELLING_MS,
): Promise<LogoutNotices> {
  const tenant = tenantOf(tenantId);
  const sessions = await signedInSessions(store, tenant.name, accountId);
  const deliveries = new Map<string, { issuerPath: string; clientId: string; sid: string }>();
  for (const { issuerPath, sids } of sessions)
    for (const [clientId, sid] of Object.entries(sids))
      deliveries.set(`${issuerPath} ${clientId} ${sid}`, { issuerPath, clientId, sid });
  const outcomes = await inTurnsOf(
    DELIVERIES_AT_ONCE,
    Date.now() + tellingMs,
    [...deliveries.values()].map(({ issuerPath, clientId, sid }) => async (late) => {
      const provider = await providerOf({ ...tenant, ...(issuerPath ? { path: issuerPath } : {}) });
      const client = (await provider.Client.find(clientId)) as unknown as LogoutClient | undefined;
      if (!client?.backchannelLogoutUri) return null;
      const retries = retriesOfProvider.get(provider);
      const undelivered = { tenant: tenant.name, tenantId: tenant.id, issuerPath, clientId, sub: accountId, sid };
      if (late) {
        if (!retries) return 'failed';
        await keep(retries, [undelivered]);
        return 'kept';
      }
      const reason = await client.backchannelLogout(accountId, sid).then(
        () => null,
        (error: unknown) => whyNotDelivered(client, error),
      );
      if (reason === null) return 'delivered';
      log.warn({ clientId, tenant: tenant.name, reason, kept: Boolean(retries) }, 'back-channel logout not delivered');
      if (!retries) return 'failed';
      await keep(retries, [undelivered]);
      return 'kept';
    }),
  );
  const kept = outcomes.filter((outcome) => outcome === 'kept').length;
  return {
    delivered: outcomes.filter((outcome) => outcome === 'delivered').length,
    failed: outcomes.filter((outcome) => outcome === 'failed').length + kept,
    kept,
  };
}
