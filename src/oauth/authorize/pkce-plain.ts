import { createHash } from 'node:crypto';
import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/**
 * The spec accepts PKCE `plain`; oidc-provider 9 implements only S256. A plain challenge is
 * its verifier, so replacing it by its S256 hash before oidc-provider sees the request makes
 * the later code_verifier check succeed exactly when plain PKCE would.
 */
export async function acceptPlainPkce(ctx: ArbiterContext, next: Next): Promise<void> {
  if (ctx.method === 'GET') {
    const { code_challenge: challenge, code_challenge_method: method } = ctx.query;
    if (method === 'plain' && typeof challenge === 'string' && VERIFIER.test(challenge)) {
      ctx.query = {
        ...ctx.query,
        code_challenge: createHash('sha256').update(challenge).digest('base64url'),
        code_challenge_method: 'S256',
      };
    }
  }
  await next();
}
