/**
 * Every collection Arbiter declares, with the unique keys and indexes its components declare
 * it with, so that a store can prepare them when it is opened (the MongoDB store creates its
 * indexes, TTL included, in openStore). Each spec is the component's own constant, so the two
 * cannot drift apart; a collection not listed here is prepared on first use instead.
 */
import { OIDC_COLLECTION } from '../../adapters/oidc/index.js';
import { COLLECTIONS, storeSpecOf } from '../admin/collections.js';
import { AUDIT_LOG_COLLECTION } from '../audit/log.js';
import { DELEGATIONS_COLLECTION } from '../delegation/records.js';
import { UPSTREAM_LOGINS_COLLECTION } from '../oauth/interactions/upstream-logins.js';
import { PROVIDER_SECRETS_COLLECTION } from '../oauth/keys.js';
import { TENANTS_COLLECTION } from '../tenancy/index.js';
import { PERMISSION_TICKETS_COLLECTION } from '../uma/tickets.js';
import { UMA_RESOURCES_COLLECTION } from '../uma/resources.js';
import { SEALING_KEYS_COLLECTION } from './sealed.js';
import type { CollectionSpec } from './types.js';

/** A function, not a constant: these modules import the store too, and are read only once all are loaded. */
export function knownCollections(): CollectionSpec[] {
  return [...COLLECTIONS.map(storeSpecOf), OIDC_COLLECTION, AUDIT_LOG_COLLECTION, UPSTREAM_LOGINS_COLLECTION, PROVIDER_SECRETS_COLLECTION, TENANTS_COLLECTION, SEALING_KEYS_COLLECTION, UMA_RESOURCES_COLLECTION, PERMISSION_TICKETS_COLLECTION, DELEGATIONS_COLLECTION];
}
