import { randomBytes } from 'node:crypto';
import type { CollectionSpec, Store, StoredDoc } from '../store/index.js';
import { storageDigest } from '../store/index.js';

/** One permission of a ticket: scopes on one resource (UMA 2.0 Federated Authorization §4.1). */
export interface RequestedPermission {
  resource_id: string;
  resource_scopes: string[];
}

/** A permission ticket as stored: only the digest of its value, which is the key. */
export interface TicketRecord extends StoredDoc {
  id: string;
  permissions: RequestedPermission[];
  /** The resource server (and owner) that asked for it. */
  ownerSub: string | null;
  ownerClientId: string;
  createdAt: string;
  /** Epoch milliseconds: the store no longer shows the ticket after this instant. */
  expiresAt: number;
  redeemedAt: string | null;
}

export const PERMISSION_TICKETS_COLLECTION: CollectionSpec = { name: 'uma_tickets' };

const tickets = (store: Store, tenant: string) => store.collection<TicketRecord>(PERMISSION_TICKETS_COLLECTION, tenant);

/** Stores a new ticket for these permissions; returns its value (shown once, stored as a digest). */
export async function issueTicket(
  store: Store,
  tenant: string,
  owner: { sub: string | null; clientId: string },
  permissions: RequestedPermission[],
  lifetimeSeconds: number,
): Promise<string> {
  const value = randomBytes(32).toString('base64url');
  const now = Date.now();
  await tickets(store, tenant).insert({
    id: storageDigest(value),
    permissions,
    ownerSub: owner.sub,
    ownerClientId: owner.clientId,
    createdAt: new Date(now).toISOString(),
    expiresAt: now + lifetimeSeconds * 1000,
    redeemedAt: null,
  });
  return value;
}

/** The unexpired, unredeemed ticket with this value, or null. */
export async function findTicket(store: Store, tenant: string, value: string): Promise<TicketRecord | null> {
  if (value.length > 256) return null;
  const record = await tickets(store, tenant).get(storageDigest(value));
  return record && !record.redeemedAt ? record : null;
}

/** Marks the ticket redeemed, atomically: true for exactly one of concurrent redemptions. */
export async function redeemTicket(store: Store, tenant: string, ticket: TicketRecord): Promise<boolean> {
  return (
    (await tickets(store, tenant).update(ticket.id, { redeemedAt: new Date().toISOString() }, { redeemedAt: null })) !==
    null
  );
}

/** The tickets a resource server asked for, deleted with it (src/oauth/shared/owned-artefacts.ts). Returns how many. */
export function deleteTicketsOf(store: Store, tenant: string, clientId: string): Promise<number> {
  return tickets(store, tenant).deleteMany({ ownerClientId: clientId });
}
