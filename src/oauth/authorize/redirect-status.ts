import type { Context, Next } from 'koa';

/** The spec answers /authorize with 302 Found; oidc-provider redirects with 303 See Other. */
export async function authorizeRedirectsAs302(ctx: Context, next: Next): Promise<void> {
  await next();
  if (ctx.status === 303 && (ctx.path === '/authorize' || ctx.path.startsWith('/authorize/'))) ctx.status = 302;
}
