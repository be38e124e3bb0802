/**
 * Part of the composition root: every collection Arbiter declares, handed to openStore so that
 * a store can prepare them when it is opened (the MongoDB store creates their indexes, TTL
 * included). The shared records come from src/catalog; each other collection is declared by the
 * one component that reads and writes it, in its folder's collections.ts (or a module that imports
 * nothing heavy): the command line opens the store through this module, and must not load the
 * server (oidc-provider, Koa, the policy engines) to learn the collections' names
 * (test/unit/cli/light-commands.test.ts). A collection not listed here is prepared on first use instead.
 */
import { OIDC_COLLECTION, OIDC_UPGRADES_COLLECTION } from '../adapters/oidc/collection.js';
import {
  ADMIN_API_KEYS_COLLECTION,
  ADMIN_SESSIONS_COLLECTION,
  POLICY_HISTORY_COLLECTION,
} from './admin/collections.js';
import {
  ACTIVITY_COLLECTION,
  AUDIT_LOG_COLLECTION,
  AUDIT_SHAPES_COLLECTION,
  LATEST_DECISIONS_COLLECTION,
} from './audit/collections.js';
import { COLLECTIONS, storeSpecOf } from './catalog/index.js';
import { POLICY_FAULTS_COLLECTION, SHADOW_COLLECTION } from './policy/collections.js';
import { DELEGATIONS_COLLECTION } from './delegation/records.js';
import { OUTBOX_COLLECTION, OUTBOX_LEASES_COLLECTION } from './outbox/index.js';
import {
  SSF_POLICY_RECHECKS_COLLECTION,
  SSF_POLL_COLLECTION,
  SSF_RECEIVED_SETS_COLLECTION,
  SSF_STREAMS_COLLECTION,
} from './signals/collections.js';
import { UPSTREAM_LOGINS_COLLECTION } from './oauth/interactions/upstream-logins.js';
import { UPSTREAM_SESSIONS_COLLECTION } from './oauth/interactions/upstream-sessions.js';
import { PROVIDER_SECRETS_COLLECTION } from './oauth/keys.js';
import { dirname, resolve } from 'node:path';
import { projectPath } from './config/index.js';
import { documentInBackup, openStore, restoreStore } from './store/open.js';
import { SCHEMA_COLLECTION, SEALING_KEYS_COLLECTION, type CollectionSpec, type Store } from './store/index.js';
import { TENANTS_COLLECTION } from './tenancy/index.js';
import { PERMISSION_TICKETS_COLLECTION } from './uma/tickets.js';
import { UMA_RESOURCES_COLLECTION } from './uma/resources.js';

export function knownCollections(): CollectionSpec[] {
  return [
    ...COLLECTIONS.map(storeSpecOf),
    OIDC_COLLECTION,
    OIDC_UPGRADES_COLLECTION,
    AUDIT_LOG_COLLECTION,
    ACTIVITY_COLLECTION,
    LATEST_DECISIONS_COLLECTION,
    AUDIT_SHAPES_COLLECTION,
    SHADOW_COLLECTION,
    POLICY_FAULTS_COLLECTION,
    UPSTREAM_LOGINS_COLLECTION,
    UPSTREAM_SESSIONS_COLLECTION,
    PROVIDER_SECRETS_COLLECTION,
    TENANTS_COLLECTION,
    SEALING_KEYS_COLLECTION,
    SCHEMA_COLLECTION,
    UMA_RESOURCES_COLLECTION,
    PERMISSION_TICKETS_COLLECTION,
    DELEGATIONS_COLLECTION,
    POLICY_HISTORY_COLLECTION,
    ADMIN_API_KEYS_COLLECTION,
    ADMIN_SESSIONS_COLLECTION,
    SSF_RECEIVED_SETS_COLLECTION,
    OUTBOX_COLLECTION,
    OUTBOX_LEASES_COLLECTION,
    SSF_STREAMS_COLLECTION,
    SSF_POLL_COLLECTION,
    SSF_POLICY_RECHECKS_COLLECTION,
  ];
}

/**
 * The store named by a STORE_URL (see openStore), with every collection above prepared. Of SQLite
 * directories only the default one, data/ in the project, is made when missing (the first start);
 * any other must exist. `sqliteLockWaitMs`: STORE_SQLITE_LOCK_WAIT_MS (see openStore).
 */
export function openArbiterStore(
  url: string,
  { sqliteLockWaitMs }: { sqliteLockWaitMs?: number } = {},
): Promise<Store> {
  return openStore(url, knownCollections(), { createDirectory: isDefaultDataDirectory(url), sqliteLockWaitMs });
}

function isDefaultDataDirectory(url: string): boolean {
  const location = url.startsWith('sqlite:') ? url.slice('sqlite:'.length) : null;
  return location !== null && location !== ':memory:' && dirname(resolve(location)) === projectPath('data');
}

/** A backup file's contents in place of the SQLite store a STORE_URL names (`arbiter restore`). */
export { restoreStore as restoreArbiterStore };
/** One document of such a backup file, read before a restore replaces anything. */
export { documentInBackup };
