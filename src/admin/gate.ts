import type Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import { isAdminPath, isServedAdminSpelling } from '../http/admin-path.js';
import { notFound } from '../http/errors.js';
import { assertSingleValued } from '../http/parameters.js';
import { requireAdminKey } from './auth.js';

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
      if (!isServedAdminSpelling(ctx.path)) throw noOperation(ctx);
      assertSingleValued(ctx.querystring, 'query parameter');
      await routes(ctx, () =>
        methods(ctx, async () => {
          throw noOperation(ctx);
        }),
      );
    });
  };
}

function noOperation(ctx: Context) {
  return notFound(`no Admin API operation ${ctx.method} ${ctx.path}`);
}
