export { adminRouter, type AdminOptions } from './router.js';
export { adminOpenApi } from './openapi.js';
export { adminGate, isAdminPath, ADMIN_PREFIX } from './gate.js';
export { COLLECTIONS, adminCollection, definitionFor, type CollectionDefinition } from './collections.js';
export type { AdminRecord, RecordCheck } from './records.js';
