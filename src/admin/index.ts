export { adminRouter, UPSERT_BY, type AdminOptions } from './router.js';
export { adminOpenApi } from './openapi.js';
export { adminGate } from './gate.js';
export { isAdminPath, ADMIN_PREFIX } from '../http/admin-path.js';
export type { RecordCheck, StoredRecord as AdminRecord } from '../records/index.js';
export { AdminApiKeys } from './api-keys.js';
export { POLICY_HISTORY_COLLECTION, ADMIN_SESSIONS_COLLECTION } from './collections.js';
export { AdminSessions, adminSignIn, SIGN_IN_CALLBACK_PATH, SIGN_IN_PATH, SIGN_OUT_PATH } from './sign-in.js';
