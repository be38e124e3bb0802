/**
 * The collections this folder declares, in a module that imports nothing at run time: the composition
 * root (src/collections.ts) prepares them, and the command line opens the store, without loading
 * the folder's code.
 */
import type { CollectionSpec } from '../store/index.js';

/**
 * Named Admin API keys, each with a role (src/admin/roles.ts), optionally an expiry (`expiresAt`:
 * from then on the key is no key) and a list of tenants (`tenants`: the key reaches only those
 * tenants' records, and nothing server-wide; src/admin/gate.ts). A key is 32 random bytes, shown
 * once in the answer to its creation; the store keeps only its SHA-256 digest
 * (src/store/digest.ts), so a copy of the store holds no usable key. Revoking deletes the record:
 * the key stops working at once, on every node (each call looks its key up).
 * SERVICE_ADMIN_API_KEY is the bootstrap key: role admin, named `bootstrap`, never stored.
 */
export const ADMIN_API_KEYS_COLLECTION = { name: 'admin_api_keys', uniqueKeys: [['name'], ['keyDigest']] };

export const ADMIN_SESSIONS_COLLECTION = { name: 'admin_sessions' };

export const POLICY_HISTORY_COLLECTION: CollectionSpec = { name: 'policy_history', indexes: ['recordId'] };
