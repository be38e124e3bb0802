import {
  resourceRecords,
  resourceServerRecords,
  resourceTypeRecords,
  type ResourceServerRecord,
} from '../../catalog/index.js';
import type { ResourceIndicatorInput } from '../../policy/index.js';
import { TurnReads, type Store } from '../../store/index.js';

export type { ResourceServerRecord };

export interface ResolvedResource {
  /** The registered resource server, when the indicator names one. */
  server: ResourceServerRecord | null;
  /** The resource type URI the indicator resolved to, or null. */
  typeUri: string | null;
}

/**
 * Resolves an RFC 8707 resource indicator to a resource type: a registered resource server's
 * first type URI, else a registered resource's type, else the caller's `resource_type` hint.
 */
export async function resolveResource(
  store: Store,
  tenant: string,
  resource: string | null,
  hint: string | null,
): Promise<ResolvedResource> {
  if (!resource) return { server: null, typeUri: hint };
  const server = await resourceServerRecords(store, tenant).findOne({
    resourceIndicator: resource,
  });
  if (server && server.enabled !== false) return { server, typeUri: server.typeUris?.[0] ?? hint };
  const registered = await resourceRecords(store, tenant).findOne({ resourceIdentifier: resource });
  if (registered) {
    const type = await resourceTypeRecords(store, tenant).get(registered.resourceTypeId);
    if (type) return { server: null, typeUri: type.typeUri };
  }
  return { server: null, typeUri: hint };
}

/** Resource servers by their client, read this turn (TurnReads): every introspection asks for its caller's. */
const serversOfClientsThisTurn = new TurnReads<ResourceServerRecord[]>();

/**
 * The resource servers registered with a client as their introspection client (by the client
 * record's internal id; one client may front several), oldest first, read from the store at most
 * once per event-loop turn. None is kept too: a write through this store (one registering one)
 * ends what the turn kept.
 */
export async function resourceServersOfClient(
  store: Store,
  tenant: string,
  clientRecordId: number,
): Promise<ResourceServerRecord[]> {
  return serversOfClientsThisTurn.read(store, `${tenant}\u0000${clientRecordId}`, () =>
    resourceServerRecords(store, tenant).find(
      { clientId: clientRecordId },
      { sort: { field: 'id', direction: 'asc' } },
    ),
  );
}

/** RFC 8707: an absolute URI without a fragment. */
export function isValidResourceIndicator(value: string): boolean {
  if (value.includes('#')) return false;
  try {
    return Boolean(new URL(value).protocol);
  } catch {
    return false;
  }
}

/**
 * RFC 8707 §2: `resource` may be given several times in an authorization request and a token
 * request. Every other parameter stays single-valued (src/http/parameters.ts).
 */
export const REPEATABLE_PARAMETERS: readonly string[] = ['resource'];

/**
 * How many resource indicators one authorization request may name. Each is resolved and decided
 * by the policy, and each becomes a token request of its own: ten is more than any client has
 * shown a use for, and keeps a request from making the server resolve hundreds.
 */
export const MAX_RESOURCE_INDICATORS = 10;

/** A `resource` parameter as a list: absent is none, one value is one, a repeated one is all of them in order. */
export function resourceList(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((item): item is string => typeof item === 'string');
  return typeof value === 'string' ? [value] : [];
}

/**
 * Resolves each requested resource to its resource type in the request's tenant. The
 * `resource_type` hint names the type of a single unregistered resource: with several it would
 * be ambiguous, so then it is not used.
 */
export async function resolveResources(
  store: Store,
  tenant: string,
  resources: string[],
  hint: string | null,
): Promise<ResourceIndicatorInput[]> {
  const usedHint = resources.length === 1 ? hint : null;
  return Promise.all(
    resources.map(async (resource) => ({
      resource,
      resolved_resource_type: (await resolveResource(store, tenant, resource, usedHint)).typeUri,
    })),
  );
}
