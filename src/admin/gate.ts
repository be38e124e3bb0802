import type Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import { notFound } from '../http/errors.js';
import { assertSingleValued } from '../http/parameters.js';
import { requireAdminKey } from './auth.js';

export const ADMIN_PREFIX = '/admin/api';

/**
 * True for every spelling of a path that names the Admin surface: letter case, doubled or
 * trailing slashes, percent-encoded characters and dot segments are undone before comparing,
 * so that no spelling reaches an Admin handler, or escapes the audit log, without the key.
 */
export function isAdminPath(path: string): boolean {
  const canonical = canonicalPath(path).toLowerCase();
  return canonical === ADMIN_PREFIX || canonical.startsWith(`${ADMIN_PREFIX}/`);
}

/**
 * The one gate in front of the whole Admin API: the key first (for every spelling), then
 * only the exact spelling the router serves; any other is a 404. Query parameters are single-valued.
 */
export function adminGate(adminApiKey: string, router: Router): Middleware {
  const checkKey = requireAdminKey(adminApiKey);
  const routes = router.routes() as Middleware;
  const methods = router.allowedMethods({ throw: true }) as Middleware;
  return async (ctx: Context, next: Next) => {
    if (!isAdminPath(ctx.path)) return next();
    await checkKey(ctx, async () => {
      if (!isServedSpelling(ctx.path)) throw noOperation(ctx);
      assertSingleValued(ctx.querystring, 'query parameter');
      await routes(ctx, () => methods(ctx, async () => {
        throw noOperation(ctx);
      }));
    });
  };
}

/** The spelling the router serves: the exact prefix, single slashes, no dot segment, no trailing slash. */
function isServedSpelling(path: string): boolean {
  if (!(path === ADMIN_PREFIX || path.startsWith(`${ADMIN_PREFIX}/`))) return false;
  const segments = path.split('/').slice(1);
  return segments.every((segment) => segment !== '' && !isDotSegment(safeDecode(segment)));
}

function noOperation(ctx: Context) {
  return notFound(`no Admin API operation ${ctx.method} ${ctx.path}`);
}

/** Percent-decoding (repeatedly, so that double encoding is undone too), single slashes, dot segments resolved. */
function canonicalPath(path: string): string {
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
