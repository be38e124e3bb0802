import Provider, { type AdapterPayload } from 'oidc-provider';
import { clientRecords } from '../../catalog/index.js';
import { TurnReads, type Store, type StoredDoc, type TenantCollection } from '../../store/index.js';
import { TOKEN_EXCHANGE } from '../token/grants/token-exchange/parameters.js';
import { UMA_TICKET } from '../token/grants/uma-ticket/parameters.js';
import { looksLikeDocumentUrl } from '../register/cimd/url.js';

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
  /** RFC 9126 §6: authorization requests only through /par. */
  requirePushedAuthorizationRequests?: boolean;
  /** The algorithm the client's request objects must be signed with (RFC 9101; OIDC Registration). */
  requestObjectSigningAlg?: string;
  scopes?: string[];
  softwareStatement?: Record<string, unknown>;
  registrationType?: string;
  /** Registered grant types (dynamic registration); absent: derived from the client type and redirect URIs. */
  grantTypes?: string[];
  responseTypes?: string[];
  tosUri?: string;
  policyUri?: string;
  contacts?: string[];
  softwareId?: string;
  softwareVersion?: string;
  /** The software statement as presented (a signed JWT, not secret), echoed by RFC 7592 reads. */
  softwareStatementJwt?: string;
  /** Entitlements the `register` decision granted; `client.granted_resources` in later decisions. */
  grantedResources?: { type: string; scopes: string[] }[];
  /** RFC 7592: storageDigest of the registration access token; the token itself is never stored. */
  registrationAccessTokenDigest?: string;
  /** RFC 7591 client_id_issued_at (Unix seconds). */
  clientIdIssuedAt?: number;
  /** How many times its tokens were revoked (absent: never); only the server writes it (src/oauth/shared/owned-artefacts.ts). */
  tokenEpoch?: number;
  tenantId: string | null;
}

export const CLIENTS_COLLECTION = clientRecords.spec.name;

/**
 * The tenant's clients, declared as the Admin API declares them (clientId unique per tenant), so
 * that every writer (Admin API, registration, metadata documents) is held to the same keys.
 */
export function clientsCollection(store: Store, tenant: string): TenantCollection<ClientRecord> {
  return clientRecords<ClientRecord>(store, tenant);
}

/** Client records read this turn (TurnReads): client authentication and the same request's policy input both need one. */
const clientsReadThisTurn = new TurnReads<ClientRecord | null>();

/**
 * A client's record, read from the store at most once per event-loop turn (TurnReads). Only a
 * record found is kept, so a client created meanwhile is found.
 */
export async function findClientRecord(store: Store, tenant: string, clientId: string): Promise<ClientRecord | null> {
  return clientsReadThisTurn.read(
    store,
    `${tenant}\u0000${clientId}`,
    () => clientsCollection(store, tenant).findOne({ clientId }),
    (record) => record !== null,
  );
}

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

function rememberForRequest(record: ClientRecord): void {
  const ctx = Provider.ctx;
  if (!ctx || record.enabled === false) return;
  let seen = recordsSeenByRequest.get(ctx);
  if (!seen) recordsSeenByRequest.set(ctx, (seen = new Map()));
  seen.set(record.clientId, record);
}

/** oidc-provider client metadata for an Admin API client record; disabled clients do not exist for the protocol. */
export function clientMetadata(record: ClientRecord): AdapterPayload | undefined {
  if (record.enabled === false) return undefined;
  const confidential = record.clientType === 'confidential';
  const grants = grantTypes(record);
  const metadata: Record<string, unknown> = {
    client_id: record.clientId,
    client_name: record.clientName,
    client_uri: record.clientUri,
    logo_uri: record.logoUri,
    redirect_uris: record.redirectUris ?? [],
    post_logout_redirect_uris: record.postLogoutRedirectUris ?? [],
    response_types: grants.includes('authorization_code') ? ['code'] : [],
    grant_types: grants,
    token_endpoint_auth_method: record.tokenEndpointAuthMethod ?? (confidential ? 'client_secret_basic' : 'none'),
    jwks_uri: record.jwksUri,
    jwks: record.jwks,
    require_pushed_authorization_requests: record.requirePushedAuthorizationRequests,
    // Without keys no request object of the client can be verified at all, and oidc-provider would
    // refuse the whole client for a signing algorithm without keys: the algorithm is then moot.
    request_object_signing_alg: record.jwks || record.jwksUri ? record.requestObjectSigningAlg : undefined,
    // The BCrypt hash: oidc-provider compares presented secrets through our compareClientSecret.
    client_secret: confidential ? (record.clientSecret ?? undefined) : undefined,
  };
  return Object.fromEntries(Object.entries(metadata).filter(([, value]) => value !== undefined)) as AdapterPayload;
}

/**
 * Registered grant types when the record lists them (dynamic registration), else: redirect-based
 * grants need a redirect URI; client_credentials needs a secret or a key.
 */
function grantTypes(record: ClientRecord): string[] {
  if (Array.isArray(record.grantTypes)) {
    const redirects = Boolean(record.redirectUris?.length);
    const confidential = record.clientType === 'confidential';
    const registered = record.grantTypes.filter((grant) =>
      grant === 'client_credentials' ? confidential : grant !== 'authorization_code' || redirects,
    );
    return [...new Set([...registered, ...POLICY_DECIDED_GRANTS])];
  }
  const userGrants = record.redirectUris?.length ? ['authorization_code', 'refresh_token'] : [];
  return record.clientType === 'confidential'
    ? [...userGrants, 'client_credentials', ...POLICY_DECIDED_GRANTS]
    : [...userGrants, ...POLICY_DECIDED_GRANTS];
}

/**
 * Grants every client may ask for, because the policy decides each request: token exchange (the
 * grant refuses public clients with unauthorized_client, as RFC 8693 needs a confidential one)
 * and the UMA grant (uma_permission decides per permission).
 */
/**
 * Client ID metadata documents (./cimd): `resolve(clientId, stored)` → the client record to serve,
 * or undefined when the client_id names no usable document (the client does not exist).
 */
export interface ClientDocuments {
  resolve(clientId: string, stored: ClientRecord | null): Promise<ClientRecord | undefined>;
}

const POLICY_DECIDED_GRANTS = [TOKEN_EXCHANGE, UMA_TICKET];

/**
 * The adapter's Client lookup. A client_id that is a URL and not an operator's or a
 * registration's client is resolved by `documents` (client ID metadata documents, ./cimd). Every
 * client may ask for every RAR type policy data defines (the policy decides per client): its
 * metadata lists none, which the provider reads as unrestricted (internals.ts).
 */
export function clientLookup(store: Store, tenant: string, documents?: ClientDocuments) {
  return async (clientId: string) => {
    const found = await findClientRecord(store, tenant, clientId);
    const record =
      documents && looksLikeDocumentUrl(clientId) && (!found || found.registrationType === 'cimd')
        ? await documents.resolve(clientId, found)
        : found;
    if (record) rememberForRequest(record);
    return record ? clientMetadata(record) : undefined;
  };
}
