import { createHash } from 'node:crypto';
import { stringify, type ParsedUrlQueryInput } from 'node:querystring';
import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/**
 * The spec accepts PKCE `plain`; oidc-provider 9 implements only S256. A plain challenge is
 * its verifier, so replacing it by its S256 hash before oidc-provider sees the request makes
 * the later code_verifier check succeed exactly when plain PKCE would. In the query of a GET,
 * and in a pushed form (/par, read by formBody: its parsed and its raw copy, which oidc-provider
 * parses). A signed request object cannot be rewritten: inside one only S256 is accepted.
 */
export async function acceptPlainPkce(ctx: ArbiterContext, next: Next): Promise<void> {
  if (ctx.method === 'GET') {
    const replaced = withS256Challenge(ctx.query);
    if (replaced) {
      ctx.query = replaced;
      ctx.state.pkcePlain = true;
    }
  } else if (ctx.method === 'POST' && ctx.state.body) {
    const replaced = withS256Challenge(ctx.state.body);
    if (replaced) {
      ctx.state.pkcePlain = true;
      ctx.state.body = replaced;
      (ctx.request as unknown as { body: string }).body = stringify(replaced as ParsedUrlQueryInput);
    }
  }
  await next();
}

/** The parameters with a plain challenge replaced by its S256 hash; undefined when there is none. */
function withS256Challenge<T extends Record<string, unknown>>(parameters: T): T | undefined {
  const { code_challenge: challenge, code_challenge_method: method } = parameters;
  if (method !== 'plain' || typeof challenge !== 'string' || !VERIFIER.test(challenge)) return undefined;
  return {
    ...parameters,
    code_challenge: createHash('sha256').update(challenge).digest('base64url'),
    code_challenge_method: 'S256',
  };
}
