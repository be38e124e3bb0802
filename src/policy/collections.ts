/**
 * The collections this folder declares, in a module that imports nothing at run time: the composition
 * root (src/collections.ts) prepares them, and the command line opens the store, without loading
 * the folder's code.
 */
import type { CollectionSpec } from '../store/index.js';

export const POLICY_FAULTS_COLLECTION: CollectionSpec = { name: 'policy_fault_shares' };

export const SHADOW_COLLECTION: CollectionSpec = { name: 'shadow_shares', indexes: ['candidateRevision'] };
