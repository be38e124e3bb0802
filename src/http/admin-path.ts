/**
 * Which paths name the Admin API. The Admin gate (src/admin/gate.ts) and the audit log
 * (src/audit/middleware.ts) must agree on it, and the audit log sits below the Admin API:
 * so the spelling rules live here, at the bottom, with no knowledge of the Admin API itself.
 */

export const ADMIN_PREFIX = '/admin/api';

/** The console's sign-in through an identity provider, its callback, and sign-out (src/admin/sign-in.ts). */
export const SIGN_IN_PATH = '/admin/sign-in';
export const SIGN_IN_CALLBACK_PATH = '/admin/sign-in/callback';
export const SIGN_OUT_PATH = '/admin/sign-out';

/**
 * True for every spelling of a path that names the Admin surface: letter case, doubled or
 * trailing slashes, percent-encoded characters and dot segments are undone before comparing,
 * so that no spelling reaches an Admin handler, or escapes the audit log, without the key.
 */
export function isAdminPath(path: string): boolean {
  const canonical = canonicalPath(path).toLowerCase();
  return canonical === ADMIN_PREFIX || canonical.startsWith(`${ADMIN_PREFIX}/`);
}

/** The console's page; its assets are below CONSOLE_ASSETS. */
const CONSOLE_PAGE = '/admin';
const CONSOLE_ASSETS = '/admin/assets';

/**
 * True for every spelling of the admin surface's paths under /admin: the console's page, its
 * assets and the Admin API. Nothing else under /admin (a tenant named `admin` has AuthZEN paths
 * such as /admin/access/v1/evaluation).
 */
export function isAdminSurfacePath(path: string): boolean {
  const canonical = canonicalPath(path).toLowerCase();
  return (
    canonical === CONSOLE_PAGE ||
    canonical === CONSOLE_ASSETS ||
    canonical.startsWith(`${CONSOLE_ASSETS}/`) ||
    canonical === ADMIN_PREFIX ||
    canonical.startsWith(`${ADMIN_PREFIX}/`)
  );
}

/** The spelling the Admin router serves: the exact prefix, single slashes, no dot segment, no trailing slash. */
export function isServedAdminSpelling(path: string): boolean {
  if (!(path === ADMIN_PREFIX || path.startsWith(`${ADMIN_PREFIX}/`))) return false;
  const segments = path.split('/').slice(1);
  return segments.every((segment) => segment !== '' && !isDotSegment(safeDecode(segment)));
}

/** A path of letters, digits, "_", "-" and single slashes: nothing to decode and no dot segment, so it is its own canonical form. */
const PLAIN_PATH = /^(?:\/[\w-]+)+$/;

/** Percent-decoding (repeatedly, so that double encoding is undone too), single slashes, dot segments resolved. */
function canonicalPath(path: string): string {
  // Every request asks several times (the audit log, the Admin gate, the activity counts): most paths are plain.
  if (PLAIN_PATH.test(path)) return path;
  let decoded = path;
  for (let round = 0; round < 3; round += 1) {
    const next = safeDecode(decoded);
    if (next === decoded) break;
    decoded = next;
  }
  const resolved: string[] = [];
  for (const segment of decoded.replace(/\\/g, '/').split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') resolved.pop();
    else resolved.push(segment);
  }
  return `/${resolved.join('/')}`;
}

function isDotSegment(segment: string): boolean {
  return segment === '.' || segment === '..';
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
