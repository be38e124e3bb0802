import { resourceRecords, resourceServerRecords, resourceTypeRecords } from '../../catalog/index.js';
import type { Store, StoredDoc } from '../../store/index.js';

interface ResourceServerRecord extends StoredDoc {
  id: number;
  resourceIndicator: string;
  typeUris?: string[];
  enabled?: boolean;
  capability?: Record<string, unknown>;
  clientId?: number;
}

interface ResourceRecord extends StoredDoc {
  id: number;
  resourceIdentifier: string;
  resourceTypeId: number;
}

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
  const server = await resourceServerRecords<ResourceServerRecord>(store, tenant).findOne({
    resourceIndicator: resource,
  });
  if (server && server.enabled !== false) return { server, typeUri: server.typeUris?.[0] ?? hint };
  const registered = await resourceRecords<ResourceRecord>(store, tenant).findOne({ resourceIdentifier: resource });
  if (registered) {
    const type = await resourceTypeRecords<StoredDoc & { typeUri: string }>(store, tenant).get(
      registered.resourceTypeId,
    );
    if (type) return { server: null, typeUri: type.typeUri };
  }
  return { server: null, typeUri: hint };
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
