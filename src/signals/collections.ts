/**
 * The collections this folder declares, in a module that imports nothing at run time: the composition
 * root (src/collections.ts) prepares them, and the command line opens the store, without loading
 * the folder's code.
 */
import type { CollectionSpec } from '../store/index.js';

/** The revision last rechecked (one document, in the default tenant). */
export const SSF_POLICY_RECHECKS_COLLECTION = { name: 'ssf_policy_rechecks' };

/** SETs of poll streams waiting for their receiver (RFC 8936): acknowledged ones are deleted. */
export const SSF_POLL_COLLECTION = { name: 'ssf_poll', indexes: [['streamId', 'seq']] };

export const SSF_STREAMS_COLLECTION = { name: 'ssf_streams', indexes: ['ownerClientId'] };

/**
 * The `jti`s of the SETs received, one document per transmitter and jti (its digest as id), kept
 * for SSF_RECEIVER_MAX_AGE_SECONDS, after which a SET of that age is refused anyway: the
 * collection holds at most what the transmitters pushed in that window.
 */
export const SSF_RECEIVED_SETS_COLLECTION: CollectionSpec = { name: 'ssf_received_sets' };
