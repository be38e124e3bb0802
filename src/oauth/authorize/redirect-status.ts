import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';

/** The spec answers /authorize (and its resumption, /authorize/:uid) with 302 Found; oidc-provider redirects with 303 See Other. */
export async function authorizeRedirectsAs302(ctx: ArbiterContext, next: Next): Promise<void> {
  await next();
  if (ctx.status === 303) ctx.status = 302;
}
