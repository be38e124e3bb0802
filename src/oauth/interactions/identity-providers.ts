import { identityProviderRecords, type IdentityProviderRecord } from '../../catalog/index.js';
import type { Sealer, Store } from '../../store/index.js';
import { SignInError, unavailable } from './errors.js';

/** An upstream OpenID provider as kept in the catalog (spec: "Admin API objects", identity provider). */
export type { IdentityProviderRecord };

/** Authorization request parameter naming the upstream provider (its idpId) when a tenant has several. */
export const UPSTREAM_IDP_PARAM = 'upstream_idp';

/**
 * The provider this sign-in goes to: the enabled one the client named with `upstream_idp`,
 * otherwise the enabled one created first (lowest id). A tenant without one cannot sign
 * anybody in, which the client learns as `temporarily_unavailable`.
 */
export async function chooseIdentityProvider(
  store: Store,
  sealer: Sealer,
  tenant: string,
  requested: unknown,
): Promise<IdentityProviderRecord> {
  if (typeof requested === 'string' && requested !== '') {
    const named = await enabledIdentityProvider(store, sealer, tenant, requested);
    if (!named) throw new SignInError('invalid_request', `${UPSTREAM_IDP_PARAM} names no enabled identity provider`);
    return named;
  }
  const [first] = await enabledIdentityProviders(store, tenant);
  if (!first) throw unavailable('no upstream identity provider is configured');
  return unsealed(first, sealer);
}

/** The tenant's enabled providers, oldest first (a tenant has a few); their secrets still sealed. */
async function enabledIdentityProviders(store: Store, tenant: string): Promise<IdentityProviderRecord[]> {
  const all = await identityProviderRecords(store, tenant).find({}, { sort: { field: 'id', direction: 'asc' } });
  return all.filter((record) => record.enabled !== false);
}

/** How many providers of the tenant are enabled (a tenant has a few). */
export async function enabledIdentityProviderCount(store: Store, tenant: string): Promise<number> {
  return (await enabledIdentityProviders(store, tenant)).length;
}

/** Whether the tenant has the provider `idpId`, enabled (its secret left sealed). */
export async function identityProviderEnabled(store: Store, tenant: string, idpId: string): Promise<boolean> {
  const named = await identityProviderRecords(store, tenant).findOne({ idpId });
  return named !== null && named.enabled !== false;
}

/** The enabled provider `idpId` of the tenant, its secret opened; null when there is none. */
export async function enabledIdentityProvider(
  store: Store,
  sealer: Sealer,
  tenant: string,
  idpId: string,
): Promise<IdentityProviderRecord | null> {
  const named = await identityProviderRecords(store, tenant).findOne({ idpId });
  return named && named.enabled !== false ? unsealed(named, sealer) : null;
}

/** The provider a pending sign-in started with; it may have been disabled or deleted meanwhile. */
export async function identityProviderById(
  store: Store,
  sealer: Sealer,
  tenant: string,
  id: number,
): Promise<IdentityProviderRecord> {
  const record = await identityProviderRecords(store, tenant).get(id);
  if (!record || record.enabled === false)
    throw unavailable('the identity provider of this sign-in is no longer available');
  return unsealed(record, sealer);
}

/** The record with its client secret opened (the Admin API stores it sealed). */
function unsealed(record: IdentityProviderRecord, sealer: Sealer): IdentityProviderRecord {
  return record.clientSecret ? { ...record, clientSecret: sealer.unseal(record.clientSecret) } : record;
}
