import type { Context, Next } from 'koa';

const NO_STORE_PATHS = new Set(['/authorize', '/token', '/introspect', '/userinfo', '/register']);

/** Token and authorization responses must never be cached (RFC 6749 §5.1); oidc-provider sets only Cache-Control. */
export async function noStore(ctx: Context, next: Next): Promise<void> {
  if (!NO_STORE_PATHS.has(ctx.path) && !ctx.path.startsWith('/authorize/')) return next();
  // Set before answering so that error responses thrown below carry the headers too.
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Pragma', 'no-cache');
  await next();
}
