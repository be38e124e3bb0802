/**
 * What each Admin API key may do. A key has one role; an operation needs one permission, read
 * from its method and its route (never from a list kept beside the routes, so that a route added
 * later is covered the moment it exists: a write is `operate` unless it is about policy or keys).
 * No imports: the console's browser code uses these too.
 */

export const ADMIN_ROLES = ['read-only', 'operator', 'policy-author', 'admin'] as const;
export type AdminRole = (typeof ADMIN_ROLES)[number];

/**
 * - `read`: every GET, and the calls that store nothing and run no code a caller submits
 *   (`POST …/validate` of a record that is not policy, the decision playground and the replay
 *   of an audit entry, both against the policy in force);
 * - `operate`: every other write, except those of the two below;
 * - `author-policy`: writes of policy rules and policy data, promoting or discarding shadow
 *   policy, and every call that evaluates policy a caller submits (`POST /policy-rules/validate`,
 *   `POST /policy-data/validate`, `POST /policy-impact`): policy code runs on the server, so
 *   submitting it is authoring, even when nothing is stored;
 * - `manage-keys`: creating and revoking Admin API keys.
 */
export type AdminPermission = 'read' | 'operate' | 'author-policy' | 'manage-keys';

const GRANTS: Record<AdminRole, readonly AdminPermission[]> = {
  'read-only': ['read'],
  operator: ['read', 'operate'],
  'policy-author': ['read', 'author-policy'],
  admin: ['read', 'operate', 'author-policy', 'manage-keys'],
};

/** The Admin API's collection of keys (/admin/api/api-keys). */
export const API_KEYS_SEGMENT = 'api-keys';
const POLICY_SEGMENTS = ['policy-rules', 'policy-data', 'policy-shadow'];
const POLICY_IMPACT_SEGMENT = 'policy-impact';

export function roleMay(role: AdminRole, permission: AdminPermission): boolean {
  return GRANTS[role].includes(permission);
}

export function permissionsOf(role: AdminRole): readonly AdminPermission[] {
  return GRANTS[role];
}

/** The roles that hold `permission`, for the 403 to say which would do. */
export function rolesWith(permission: AdminPermission): AdminRole[] {
  return ADMIN_ROLES.filter((role) => roleMay(role, permission));
}

/**
 * The permission an operation needs: `route` is its path under /admin/api in the router's
 * syntax (`/clients/:clientId`) or OpenAPI's (`/clients/{clientId}`).
 */
export function permissionFor(method: string, route: string): AdminPermission {
  const segments = route.split('/').filter(Boolean);
  const [collection = ''] = segments;
  const verb = method.toUpperCase();
  if (verb === 'GET' || verb === 'HEAD') return 'read';
  if (collection === API_KEYS_SEGMENT) return 'manage-keys';
  if (verb === 'POST' && runsSubmittedPolicy(segments)) return 'author-policy';
  if (verb === 'POST' && storesNothing(segments)) return 'read';
  return POLICY_SEGMENTS.includes(collection) ? 'author-policy' : 'operate';
}

/** POST /policy-impact and POST /policy-{rules,data}/validate: the candidate policy is compiled and evaluated here. */
function runsSubmittedPolicy(segments: string[]): boolean {
  const [first = '', second] = segments;
  if (segments.length === 1) return first === POLICY_IMPACT_SEGMENT;
  return segments.length === 2 && POLICY_SEGMENTS.includes(first) && second === 'validate';
}

/** POST /{collection}/validate, POST /decisions, POST /audit-logs/{id}/replay: checks and explanations of the policy in force, nothing written. */
function storesNothing(segments: string[]): boolean {
  const last = segments[segments.length - 1];
  if (segments.length === 2 && last === 'validate') return true;
  if (segments.length === 1 && last === 'decisions') return true;
  return segments.length === 3 && segments[0] === 'audit-logs' && last === 'replay';
}
