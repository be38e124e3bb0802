import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';

/** oidc-provider's refusals at UserInfo: 400 (e.g. a `Basic` header), 401 (no, unknown or expired token), 403 (no `openid`). */
const REFUSALS = new Set([400, 401, 403]);

/** oidc-provider's description of a token sent in the header and the body (or query) at once. */
const SEVERAL_MECHANISMS = /only be provided using one mechanism/;

/** DPoP challenges a DPoP client acts on (RFC 9449 §7.1, §9); they are kept next to the Bearer one. */
const DPOP_ERRORS = new Set(['invalid_dpop_proof', 'use_dpop_nonce']);

/**
 * The spec answers every refused UserInfo call with 401 and `WWW-Authenticate: Bearer
 * error="invalid_token"`: a missing, unknown, expired or revoked token, a token without
 * `openid` (oidc-provider: 403 insufficient_scope), a token without a user (client_credentials
 * tokens are not UserInfo tokens), an Authorization header of another scheme such as `Basic`
 * (oidc-provider: 400 invalid_request). The body is `{error: "invalid_token", error_description}`,
 * the description oidc-provider gave. The exception is a token given by two methods at once (the
 * header and the body): RFC 6750 §2 makes that a 400 invalid_request.
 */
export async function userinfoChallenge(ctx: ArbiterContext, next: Next): Promise<void> {
  await next();
  if (!REFUSALS.has(ctx.status)) return;
  const description = descriptionOf(ctx.body);
  if (ctx.status === 400 && SEVERAL_MECHANISMS.test(description)) {
    // RFC 6750 §2 and §3.1: a token sent by more than one method is a malformed request, not a bad token.
    ctx.body = { error: 'invalid_request', error_description: description };
    ctx.state.errorCode = 'invalid_request';
    ctx.set('WWW-Authenticate', formatChallenge('Bearer', { error: 'invalid_request' }));
    return;
  }
  const challenges = challengesOf(ctx.response.get('WWW-Authenticate'));
  ctx.status = 401;
  ctx.body = { error: 'invalid_token', error_description: description };
  ctx.state.errorCode = 'invalid_token';
  ctx.set('WWW-Authenticate', [bearerChallenge(challenges), ...dpopChallenges(challenges)]);
}

interface Challenge {
  scheme: string;
  params: Record<string, string>;
  text: string;
}

function descriptionOf(body: unknown): string {
  const described = (body as { error_description?: unknown } | null)?.error_description;
  return typeof described === 'string' && described !== ''
    ? described
    : 'the access token is missing, invalid or not valid for UserInfo';
}

function bearerChallenge(challenges: Challenge[]): string {
  const realm = challenges.find((challenge) => challenge.params.realm)?.params.realm;
  return formatChallenge('Bearer', { ...(realm ? { realm } : {}), error: 'invalid_token' });
}

/** oidc-provider's DPoP challenge (with `algs`), its error made invalid_token unless it is one of DPoP's own. */
function dpopChallenges(challenges: Challenge[]): string[] {
  return challenges
    .filter((challenge) => challenge.scheme.toLowerCase() === 'dpop')
    .map(({ params, text }) => {
      if (params.error !== undefined && DPOP_ERRORS.has(params.error)) return text;
      const { realm, algs } = params;
      return formatChallenge('DPoP', {
        ...(realm ? { realm } : {}),
        error: 'invalid_token',
        ...(algs ? { algs } : {}),
      });
    });
}

function challengesOf(header: string | string[]): Challenge[] {
  const values = (Array.isArray(header) ? header : [header]).filter((value) => value !== '');
  return values.map((text) => {
    const scheme = /^\S+/.exec(text)?.[0] ?? '';
    const params: Record<string, string> = {};
    for (const [, name, value] of text.slice(scheme.length).matchAll(/([\w-]+)="((?:[^"\\]|\\.)*)"/g))
      params[name!] = value!;
    return { scheme, params, text };
  });
}

/** Parameter values are taken as oidc-provider quoted them (or are plain tokens), so they need no escaping here. */
function formatChallenge(scheme: string, params: Record<string, string>): string {
  return `${scheme} ${Object.entries(params)
    .map(([name, value]) => `${name}="${value}"`)
    .join(', ')}`;
}
