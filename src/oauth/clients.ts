import type { AdapterPayload } from 'oidc-provider';
import type { Store, StoredDoc } from '../store/index.js';

/** A client as kept by the Admin API (see the spec's Client record). */
export interface ClientRecord extends StoredDoc {
  id: number;
  clientId: string;
  clientType: 'confidential' | 'public';
  clientSecret?: string | null;
  enabled?: boolean;
  redirectUris?: string[];
  postLogoutRedirectUris?: string[];
  clientName?: string;
  clientUri?: string;
  logoUri?: string;
  tokenEndpointAuthMethod?: string;
  jwksUri?: string;
  jwks?: { keys: object[] };
  scopes?: string[];
  softwareStatement?: Record<string, unknown>;
  registrationType?: string;
  tenantId: string | null;
}

export const CLIENTS_COLLECTION = 'clients';

/** oidc-provider client metadata for an Admin API client record; disabled clients do not exist for the protocol. */
export function clientMetadata(record: ClientRecord): AdapterPayload | undefined {
  if (record.enabled === false) return undefined;
  const confidential = record.clientType === 'confidential';
  const metadata: Record<string, unknown> = {
    client_id: record.clientId,
    client_name: record.clientName,
    client_uri: record.clientUri,
    logo_uri: record.logoUri,
    redirect_uris: record.redirectUris ?? [],
    post_logout_redirect_uris: record.postLogoutRedirectUris ?? [],
    response_types: record.redirectUris?.length ? ['code'] : [],
    grant_types: grantTypes(record),
    token_endpoint_auth_method: record.tokenEndpointAuthMethod ?? (confidential ? 'client_secret_basic' : 'none'),
    jwks_uri: record.jwksUri,
    jwks: record.jwks,
    // The BCrypt hash: oidc-provider compares presented secrets through our compareClientSecret.
    client_secret: confidential ? record.clientSecret ?? undefined : undefined,
  };
  return Object.fromEntries(Object.entries(metadata).filter(([, value]) => value !== undefined)) as AdapterPayload;
}

/** Redirect-based grants need a redirect URI; client_credentials needs a secret or a key. */
function grantTypes(record: ClientRecord): string[] {
  const userGrants = record.redirectUris?.length ? ['authorization_code', 'refresh_token'] : [];
  return record.clientType === 'confidential' ? [...userGrants, 'client_credentials'] : userGrants;
}

/**
 * The adapter's Client lookup. Every client may ask for every RAR type policy data defines
 * (the policy decides per client), so the current types are part of its metadata.
 */
export function clientLookup(store: Store, tenant: string, authorizationDetailsTypes: () => Promise<string[]>) {
  const clients = store.collection<ClientRecord>(CLIENTS_COLLECTION, tenant);
  return async (clientId: string) => {
    const record = await clients.findOne({ clientId });
    const metadata = record ? clientMetadata(record) : undefined;
    return metadata && { ...metadata, authorization_details_types: await authorizationDetailsTypes() };
  };
}
