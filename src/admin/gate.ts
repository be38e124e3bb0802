import type Router from '@koa/router';
import type { Middleware, Next } from 'koa';
import { ADMIN_PREFIX, isAdminPath, isServedAdminSpelling } from '../http/admin-path.js';
import { notFound } from '../http/errors.js';
import { assertSingleValued } from '../http/parameters.js';
import type { AdminApiKeys } from './api-keys.js';
import type { AdminSessions } from './sign-in.js';
import { assertRoleMay, assertTenantConfinement, requireAdminKey } from './auth.js';
import type { AdminContext } from './state.js';

/**
 * The one gate in front of the whole Admin API: the key first (for every spelling), then only the
 * exact spelling the router serves (any other is a 404), single-valued query parameters, the
 * key's role against the operation the router would run, and a key confined to tenants against the
 * call's tenant (403); a path or method the router does not serve is its 404 or 405, whatever the role.
 */
export function adminGate(keys: AdminApiKeys, router: Router, sessions?: AdminSessions): Middleware {
  const checkKey = requireAdminKey(keys, sessions);
  const routes = router.routes() as Middleware;
  const methods = router.allowedMethods({ throw: true }) as Middleware;
  return async (ctx: AdminContext, next: Next) => {
    if (!isAdminPath(ctx.path)) return next();
    // Answers carry keys, secrets, tokens and personal data (a new client's secret, an initial
    // access token, a subject's profile): no cache keeps any of them.
    ctx.set('Cache-Control', 'no-store');
    await checkKey(ctx, async () => {
      if (!isServedAdminSpelling(ctx.path)) throw noOperation(ctx);
      assertSingleValued(ctx.querystring, 'query parameter');
      const route = routeOf(router, ctx);
      if (route !== null) assertRoleMay(ctx, route);
      if (route !== null) assertTenantConfinement(ctx, route);
      await routes(ctx, () =>
        methods(ctx, async () => {
          throw noOperation(ctx);
        }),
      );
    });
  };
}

/** The path (under /admin/api, in the router's syntax) of the route that will answer, or null for none. */
function routeOf(router: Router, ctx: AdminContext): string | null {
  const layer = router.match(ctx.path, ctx.method).pathAndMethod.find((each) => each.methods.length > 0);
  return layer ? String(layer.path).slice(ADMIN_PREFIX.length) : null;
}

function noOperation(ctx: AdminContext) {
  return notFound(`no Admin API operation ${ctx.method} ${ctx.path}`);
}
