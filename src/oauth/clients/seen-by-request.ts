import Provider from 'oidc-provider';
import type { ClientRecord } from '../../catalog/index.js';

/** The client records each request's client lookups saw (by request context, by clientId). */
const recordsSeenByRequest = new WeakMap<object, Map<string, ClientRecord>>();

/**
 * The enabled record of `clientId` that this request's client lookup found (oidc-provider's
 * client authentication, or any later lookup): what the request issues under. Undefined outside
 * a request of oidc-provider, or when no lookup of this request found that client enabled.
 */
export function clientRecordSeenByRequest(clientId: string): ClientRecord | undefined {
  const ctx = Provider.ctx;
  return ctx ? recordsSeenByRequest.get(ctx)?.get(clientId) : undefined;
}

export function rememberForRequest(record: ClientRecord): void {
  const ctx = Provider.ctx;
  if (!ctx || record.enabled === false) return;
  let seen = recordsSeenByRequest.get(ctx);
  if (!seen) recordsSeenByRequest.set(ctx, (seen = new Map()));
  seen.set(record.clientId, record);
}
