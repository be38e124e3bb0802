import type { Context, Next } from 'koa';
import { isAuthorizationPath } from '../routes.js';

/** The spec answers /authorize with 302 Found; oidc-provider redirects with 303 See Other. */
export async function authorizeRedirectsAs302(ctx: Context, next: Next): Promise<void> {
  await next();
  if (ctx.status === 303 && isAuthorizationPath(ctx.path)) ctx.status = 302;
}
