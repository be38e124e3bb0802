import type { Context, Next } from 'koa';

const USERINFO_PATH = '/userinfo';

/**
 * The spec answers every refused UserInfo call with `WWW-Authenticate: Bearer
 * error="invalid_token"`, a missing token included. oidc-provider follows RFC 6750 §3.1
 * instead and sends no error code when no token was presented; this adds it.
 */
export async function userinfoChallenge(ctx: Context, next: Next): Promise<void> {
  await next();
  if (ctx.path !== USERINFO_PATH || ctx.status !== 401) return;
  const challenges = ctx.response.get('WWW-Authenticate');
  const list = Array.isArray(challenges) ? challenges : [challenges].filter(Boolean);
  ctx.set('WWW-Authenticate', list.length ? list.map(withInvalidToken) : 'Bearer error="invalid_token"');
}

function withInvalidToken(challenge: string): string {
  if (!/^Bearer\b/i.test(challenge) || /\berror=/.test(challenge)) return challenge;
  const parameters = challenge.replace(/^Bearer\s*/i, '');
  return parameters ? `Bearer ${parameters}, error="invalid_token"` : 'Bearer error="invalid_token"';
}
