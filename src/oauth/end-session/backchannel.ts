import type { EventEmitter } from 'node:events';
import type Provider from 'oidc-provider';
import { signedInSessions } from '../../../adapters/oidc/index.js';
import { auditFactsOf } from '../../audit/index.js';
import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import { tenantOf, type Tenant } from '../../tenancy/index.js';
import type { ConfigurationSlice } from '../context.js';
import type { ArbiterContext } from '../state.js';

/**
 * OIDC Back-Channel Logout 1.0: a client that registers `backchannel_logout_uri` is posted a
 * logout token (signed with the tenant's keys, under the issuer it signed the user in with) when
 * the user's session ends: at /session/end (oidc-provider posts them), and when an operator
 * revokes a subject's tokens or deletes the subject (tellClientsOfLogout). Every post goes
 * through the outbound guard (outbound-fetch.ts) with its timeout and address checks.
 */
export const backchannelLogout: ConfigurationSlice = () => ({
  features: { backchannelLogout: { enabled: true } },
});

/** How many logout tokens a change delivered, and how many could not be delivered after every attempt. */
export interface LogoutNotices {
  delivered: number;
  failed: number;
}

/** Each delivery is tried this many times, after these pauses (RPs restart; a logout should not be lost to one). */
const RETRY_PAUSES_MS = [250, 1000];

/**
 * The deliveries oidc-provider makes at /session/end, counted in the request's audit entry; a
 * failed one is tried again (RETRY_PAUSES_MS) after the answer, and logged with its client.
 */
export function reportBackchannelLogouts(provider: Provider, log: Logger): void {
  // Provider is an EventEmitter; its typings name neither event.
  const events = provider as unknown as EventEmitter;
  events.on('backchannel.success', (ctx: ArbiterContext) => count(ctx, 'delivered'));
  events.on(
    'backchannel.error',
    (ctx: ArbiterContext, error: Error, client: LogoutClient, accountId: string, sid: string) => {
      count(ctx, 'retried');
      void delivered(() => client.backchannelLogout(accountId, sid), RETRY_PAUSES_MS).then((ok) => {
        if (!ok) log.warn({ clientId: client.clientId, reason: error.message }, 'back-channel logout not delivered');
      });
    },
  );
}

/** The part of oidc-provider's Client a logout needs. */
interface LogoutClient {
  clientId: string;
  backchannelLogoutUri?: string;
  backchannelLogout(sub: string, sid: string): Promise<void>;
}

function count(ctx: ArbiterContext, outcome: 'delivered' | 'retried'): void {
  const result = (auditFactsOf(ctx.state).result ??= {});
  const key = `backchannelLogout${outcome === 'delivered' ? 'Delivered' : 'Retried'}`;
  result[key] = String(Number(result[key] ?? 0) + 1);
}

/**
 * Posts a logout token to every client of every session `accountId` has in the tenant
 * (`tenantId`, null: the default), each under the issuer the session was made under, before
 * those sessions are revoked; answers once every delivery succeeded or ran out of attempts.
 */
export async function tellClientsOfLogout(
  providerOf: (tenant: Tenant) => Promise<Provider>,
  store: Store,
  tenantId: string | null,
  accountId: string,
  log: Logger,
): Promise<LogoutNotices> {
  const tenant = tenantOf(tenantId);
  const sessions = await signedInSessions(store, tenant.name, accountId);
  const deliveries = new Map<string, { issuerPath: string; clientId: string; sid: string }>();
  for (const { issuerPath, sids } of sessions)
    for (const [clientId, sid] of Object.entries(sids))
      deliveries.set(`${issuerPath} ${clientId} ${sid}`, { issuerPath, clientId, sid });
  const outcomes = await Promise.all(
    [...deliveries.values()].map(async ({ issuerPath, clientId, sid }) => {
      const provider = await providerOf({ ...tenant, ...(issuerPath ? { path: issuerPath } : {}) });
      const client = (await provider.Client.find(clientId)) as unknown as LogoutClient | undefined;
      if (!client?.backchannelLogoutUri) return null;
      const ok = await delivered(() => client.backchannelLogout(accountId, sid), [0, ...RETRY_PAUSES_MS]);
      if (!ok) log.warn({ clientId, tenant: tenant.name }, 'back-channel logout not delivered');
      return ok;
    }),
  );
  return {
    delivered: outcomes.filter((ok) => ok === true).length,
    failed: outcomes.filter((ok) => ok === false).length,
  };
}

/** Tries `post` after each pause in turn until it succeeds: whether it did. */
async function delivered(post: () => Promise<void>, pausesMs: number[]): Promise<boolean> {
  for (const pause of pausesMs) {
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    try {
      await post();
      return true;
    } catch {
      // The next attempt, if any: the outbound guard bounds each one in time.
    }
  }
  return false;
}
