import { clientRecords, MAX_CLIENT_ID_LENGTH, type ClientRecord } from '../../catalog/index.js';
import { TurnReads, type Store, type TenantCollection } from '../../store/index.js';
import { looksLikeDocumentUrl } from '../register/cimd/url.js';
import { clientMetadata } from './metadata.js';
import { rememberForRequest } from './seen-by-request.js';
import { fapi2Metadata, heldToFapi2 } from '../fapi/index.js';

export { clientRecordSeenByRequest } from './seen-by-request.js';

/** A client as kept in the catalog (src/catalog/schemas.ts), its type derived from the schema. */
export type { ClientRecord };

export const CLIENTS_COLLECTION = clientRecords.spec.name;

/**
 * The tenant's clients, declared as the Admin API declares them (clientId unique per tenant), so
 * that every writer (Admin API, registration, metadata documents) is held to the same keys.
 */
export function clientsCollection(store: Store, tenant: string): TenantCollection<ClientRecord> {
  return clientRecords(store, tenant);
}

/**
 * Client records read this turn (TurnReads): client authentication and the same request's policy
 * input both need one; kept while no client changes where the store can tell (many tenants' requests share no turn).
 */
const clientsReadThisTurn = new TurnReads<ClientRecord | null>({ collections: [CLIENTS_COLLECTION] });

/**
 * A client's record, read from the store at most once per event-loop turn (TurnReads). Only a
 * record found is kept, so a client created meanwhile is found.
 */
export async function findClientRecord(store: Store, tenant: string, clientId: string): Promise<ClientRecord | null> {
  const current = () => currentClientRecord(store, tenant, clientId);
  return clientsKeptByNode.read(store, `${tenant}\u0000${clientId}`, current, isFound) ?? current();
}

/**
 * And kept between requests where the store only announces every node's writes to them
 * (TurnReads `announced`: PostgreSQL), for authenticating clients and deciding on their requests.
 * A token issued on a record another node changed a moment before (within the announcement's round
 * trip) is marked with that record's old epoch, so it dies at its first use (currentClientRecord).
 */
const clientsKeptByNode = new TurnReads<ClientRecord | null>({ collections: [CLIENTS_COLLECTION], announced: true });

/**
 * The client's record as the store has it now (shared within a turn, and kept longer only where the
 * store tells synchronously that no client changed: SQLite): for whether a token's client still
 * honours it, so that a client disabled, deleted or its tokens revoked through any node ends its
 * tokens on every node at their next use.
 */
export function currentClientRecord(store: Store, tenant: string, clientId: string): Promise<ClientRecord | null> {
  return clientsReadThisTurn.read(
    store,
    `${tenant}\u0000${clientId}`,
    () => clientsCollection(store, tenant).findOne({ clientId }),
    isFound,
  );
}

function isFound(record: ClientRecord | null): boolean {
  return record !== null;
}

/**
 * Client ID metadata documents (./cimd): `resolve(clientId, stored)` → the client record to serve,
 * or undefined when the client_id names no usable document (the client does not exist).
 */
export interface ClientDocuments {
  resolve(clientId: string, stored: ClientRecord | null): Promise<ClientRecord | undefined>;
}

/**
 * The adapter's Client lookup. A client_id that is a URL and not an operator's or a
 * registration's client is resolved by `documents` (client ID metadata documents, ./cimd). Every
 * client may ask for every RAR type policy data defines (the policy decides per client): its
 * metadata lists none, which the provider reads as unrestricted (internals.ts).
 */
export function clientLookup(
  store: Store,
  tenant: string,
  documents?: ClientDocuments,
  {
    fapi2Tenant = false,
    authMethodOffered = () => true,
  }: { fapi2Tenant?: boolean; authMethodOffered?: (method: string | undefined) => boolean } = {},
) {
  return async (clientId: string) => {
    // Found 2026-11-30: a 1 MB client_id URL was looked up, kept in the documents' negative cache
    // and logged whole, for any caller of /token or /authorize.
    if (clientId.length > MAX_CLIENT_ID_LENGTH) return undefined;
    const found = await findClientRecord(store, tenant, clientId);
    const record =
      documents && looksLikeDocumentUrl(clientId) && (!found || found.registrationType === 'cimd')
        ? await documents.resolve(clientId, found)
        : found;
    if (record) rememberForRequest(record);
    const metadata = record ? clientMetadata(record) : undefined;
    // A client registered for a method this server does not offer (mutual TLS off) cannot authenticate.
    if (metadata && !authMethodOffered(metadata.token_endpoint_auth_method)) return undefined;
    if (!metadata || !heldToFapi2(fapi2Tenant, record ?? undefined)) return metadata;
    // The FAPI 2.0 Security Profile (src/oauth/fapi): its methods and sender constraints.
    return fapi2Metadata(metadata);
  };
}
