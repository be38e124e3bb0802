import type { Next } from 'koa';
import { badRequest } from '../../http/errors.js';
import type { ArbiterContext } from '../state.js';
import { routes } from '../routes.js';

/**
 * OIDC Core §3.1.2.1: the authorization endpoint MUST accept POST, its parameters form-serialized.
 * oidc-provider answers POST only with its session cookie made `SameSite=None` (a cross-site form
 * POST carries no `Lax` cookie), which browsers refuse without `Secure`, so plain-HTTP set-ups
 * could no longer sign anyone in. Instead a POST is sent on as the same request by GET (303 See
 * Other, RFC 9110 §15.4.4): a top-level GET navigation carries the `Lax` session cookie, so
 * `prompt=none` and session reuse behave exactly as for a GET. The parameters (checked and read by
 * formBody before this) then travel in the URL, as a GET's do.
 */
export async function authorizationPostAsGet(ctx: ArbiterContext, next: Next): Promise<void> {
  if (ctx.method !== 'POST') return next();
  if (!ctx.state.body)
    throw badRequest('an authorization request by POST is a form (application/x-www-form-urlencoded)');
  // A repeated parameter (several `resource`s, RFC 8707) stays repeated.
  const parameters = new URLSearchParams();
  for (const [name, value] of Object.entries(ctx.state.body))
    for (const item of [value].flat()) if (typeof item === 'string') parameters.append(name, item);
  const query = parameters.toString();
  // The GET must fit in the request head that browsers send and Node accepts (16 KiB, cookies included).
  if (query.length > MAX_QUERY_LENGTH)
    throw badRequest(`an authorization request by POST may hold at most ${MAX_QUERY_LENGTH} characters URL-encoded`);
  ctx.status = 303;
  ctx.redirect(`${routes.authorization}?${query}`);
}

/** The longest query a POST is sent on with (URL-encoded: ASCII). */
const MAX_QUERY_LENGTH = 8192;
