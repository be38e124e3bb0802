import type { UmaResourceInput } from '../policy/index.js';
import type { CollectionSpec, Store, StoredDoc, TenantCollection } from '../store/index.js';

/** Who owns a UMA resource: the user of a user PAT, with the resource server that registered it; or that client alone. */
export interface ResourceOwner {
  sub: string | null;
  clientId: string;
}

/** A UMA resource description (UMA 2.0 Federated Authorization §3.1) as stored. */
export interface UmaResourceRecord extends StoredDoc {
  id: string;
  name: string | null;
  type: string | null;
  resourceScopes: string[];
  description: string | null;
  iconUri: string | null;
  ownerSub: string | null;
  ownerClientId: string;
  createdAt: string;
}

export const UMA_RESOURCES_COLLECTION: CollectionSpec = {
  name: 'uma_resources',
  // An owner's resources by keyset, oldest first (the registration list).
  indexes: [['ownerSub', 'ownerClientId', 'createdAt'], 'ownerClientId'],
};

export function umaResources(store: Store, tenant: string): TenantCollection<UmaResourceRecord> {
  return store.collection<UmaResourceRecord>(UMA_RESOURCES_COLLECTION, tenant);
}

/** What a resource server may see and change: the resources it registered for the same owner. */
export function ownerFilter(owner: ResourceOwner): { ownerSub: string | null; ownerClientId: string } {
  return { ownerSub: owner.sub, ownerClientId: owner.clientId };
}

/** The caller's own resource, or null: another owner's resource is not revealed. */
export async function ownedResource(
  store: Store,
  tenant: string,
  owner: ResourceOwner,
  id: string,
): Promise<UmaResourceRecord | null> {
  const record = await umaResources(store, tenant).get(id);
  return record && record.ownerSub === owner.sub && record.ownerClientId === owner.clientId ? record : null;
}

/** Any resource of the tenant by id (for the decisions, which are told the owner and decide). */
export async function findResource(store: Store, tenant: string, id: string): Promise<UmaResourceRecord | null> {
  return umaResources(store, tenant).get(id);
}

/** The resource as the policy sees it (docs/policy.md, uma_permission). */
export function resourceInput(record: UmaResourceRecord | null): UmaResourceInput | null {
  if (!record) return null;
  return {
    _id: record.id,
    name: record.name,
    type: record.type,
    resource_scopes: record.resourceScopes,
    // A user-owned resource belongs to the user alone: the client that registered it does not own it.
    owner: { sub: record.ownerSub, client_id: record.ownerSub ? null : record.ownerClientId },
  };
}

/** The resource description as the UMA API answers it. */
export function resourceDescription(record: UmaResourceRecord): Record<string, unknown> {
  const description: Record<string, unknown> = {
    _id: record.id,
    name: record.name,
    type: record.type,
    resource_scopes: record.resourceScopes,
    description: record.description,
    icon_uri: record.iconUri,
  };
  return Object.fromEntries(Object.entries(description).filter(([, value]) => value !== null));
}
