export * from './types.js';
export { openedWith, sealedFor, storageDigest } from './digest.js';
export { Sealer, SEALING_KEYS_COLLECTION } from './sealed.js';
export { TurnReads, type HeldWhileUnchanged } from './turn-reads.js';
export {
  migrate,
  schemaVersion,
  SchemaVersionError,
  SCHEMA_COLLECTION,
  SCHEMA_VERSION_DOCUMENT,
  versionOf,
  type Migration,
} from './schema-version.js';
export { ClockSkew } from './clock.js';
export { PROCESS_ID, ProcessShares } from './process-shares.js';
export { BatchWriter, windowsReadByTurn } from './batches.js';
export { EVENT_LOOP_PACE, inPacedSteps, ROW_BY_ROW_PACE } from './paced.js';
export { pageAfter, pagesByKey } from './paged.js';
