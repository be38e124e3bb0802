import type { Context, Next } from 'koa';
import { isAuthorizationPath, routes } from '../routes.js';

const NO_STORE_PATHS = new Set<string>([routes.token, routes.introspection, routes.userinfo, routes.registration]);

/** Token and authorization responses must never be cached (RFC 6749 §5.1); oidc-provider sets only Cache-Control. */
export async function noStore(ctx: Context, next: Next): Promise<void> {
  if (!NO_STORE_PATHS.has(ctx.path) && !isAuthorizationPath(ctx.path)) return next();
  // Set before answering so that error responses thrown below carry the headers too.
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Pragma', 'no-cache');
  await next();
}
