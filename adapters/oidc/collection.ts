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
  // And a user's artefacts by key, a page at a time (revokeSessionGrants at a logout): by accountId
  // alone each page sorted all of the user's (found 2026-11-29: 100,000 took 10.5 s). Both: a
  // sparse index serves only a filter that names all its fields.
  indexes: ['grantId', 'uid', 'userCode', 'clientId', 'accountId', ['accountId', 'id']],
  // A machine token has no grant, user, interaction or user code: it is in the clientId index only.
  sparseIndexes: true,
};
