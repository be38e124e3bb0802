import type { ClientInput, GrantedResource } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { findClientRecord, type ClientRecord } from './records.js';

/** How the client authenticated, in the contract's words. */
export function authenticationMethod(client: { clientAuthMethod?: string } | undefined): string | null {
  return client?.clientAuthMethod ?? null;
}

/** `input.client` for a client known to this tenant; null when it is not (yet) registered. */
export async function clientInput(
  store: Store,
  tenant: string,
  clientId: string,
  authenticatedWith: string | null = null,
): Promise<ClientInput | null> {
  const record = await findClientRecord(store, tenant, clientId);
  return record ? clientInputOf(record, authenticatedWith) : null;
}

/** `input.client` for a client record at hand. */
export function clientInputOf(record: ClientRecord, authenticatedWith: string | null): ClientInput {
  return {
    client_id: record.clientId,
    client_type: record.clientType,
    registration_type: (record.registrationType as ClientInput['registration_type']) ?? 'admin',
    scopes: record.scopes ?? [],
    granted_resources: grantedResources(record),
    ...(Array.isArray(record.grantTypes) ? { grant_types: record.grantTypes } : {}),
    ...(typeof record.softwareId === 'string' ? { software_id: record.softwareId } : {}),
    redirect_uris: record.redirectUris ?? [],
    token_endpoint_auth_method:
      record.tokenEndpointAuthMethod ?? (record.clientType === 'public' ? 'none' : 'client_secret_basic'),
    authenticated_with: authenticatedWith,
  };
}

/**
 * What the `register` decision granted (stored on the record as `grantedResources`); for a
 * record without it (Admin API), the `granted_resources` of its software statement object.
 */
function grantedResources(record: ClientRecord): GrantedResource[] {
  const granted = Array.isArray(record.grantedResources)
    ? record.grantedResources
    : record.softwareStatement?.granted_resources;
  if (!Array.isArray(granted)) return [];
  return granted.filter(
    (entry): entry is GrantedResource =>
      typeof entry?.type === 'string' &&
      Array.isArray(entry?.scopes) &&
      entry.scopes.every((scope: unknown) => typeof scope === 'string'),
  );
}
