import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';

/**
 * Token and authorization responses must never be cached (RFC 6749 §5.1); oidc-provider sets
 * only Cache-Control. The route table (edge.ts) says which endpoints' answers this covers.
 */
export async function noStore(ctx: ArbiterContext, next: Next): Promise<void> {
  // Set before answering so that error responses thrown below carry the headers too.
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Pragma', 'no-cache');
  await next();
}
