/** The AuthZEN 1.0 Authorization API: a policy decision point decided by `access_evaluation`. */
export { authzenRouter, AUTHZEN_PATHS, AUTHZEN_METADATA_PATH, type AuthzenDeps } from './router.js';
export { authzenTenantPathOf } from './tenant-paths.js';
export { AUTHZEN_DATA_KEY, MAX_CANDIDATES } from './candidates.js';
