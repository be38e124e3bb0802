export { adminRouter, unknownAdminPaths, type AdminOptions } from './router.js';
export { COLLECTIONS, definitionFor, type CollectionDefinition } from './collections.js';
export type { AdminRecord, RecordCheck } from './records.js';
