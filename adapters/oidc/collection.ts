/**
 * The collection of oidc-provider's records (the adapter, index.ts), in a module of its own with
 * no import at run time: the composition root (src/collections.ts) prepares it, and the command
 * line opens the store, without loading the adapter and oidc-provider.
 */
import type { CollectionSpec } from '../../src/store/types.js';

/** Per tenant, one row once no artefact of an earlier release is left (upgradeLegacyArtefacts in index.ts). */
export const OIDC_UPGRADES_COLLECTION: CollectionSpec = { name: 'oidc_upgrades' };

export const OIDC_COLLECTION: CollectionSpec = {
  name: 'oidc',
  indexes: ['grantId', 'uid', 'userCode', 'clientId', 'accountId'],
  // A machine token has no grant, user, interaction or user code: it is in the clientId index only.
  sparseIndexes: true,
};
