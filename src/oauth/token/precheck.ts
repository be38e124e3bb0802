import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';
import { HttpError } from '../../http/errors.js';
import { formParameter } from '../shared/form-body.js';

const REFUSED_GRANTS = new Set(['password', 'implicit']);

/**
 * Answers the /token requests the spec refuses before any client authentication is tried:
 * a missing grant_type (invalid_request) and the password grant (unsupported_grant_type).
 */
export async function tokenPrecheck(ctx: ArbiterContext, next: Next): Promise<void> {
  if (ctx.method !== 'POST' || !ctx.state.body) return next();
  const grantType = formParameter(ctx, 'grant_type');
  if (!grantType) throw new HttpError(400, 'invalid_request', "missing required parameter 'grant_type'");
  if (REFUSED_GRANTS.has(grantType))
    throw new HttpError(400, 'unsupported_grant_type', `the ${grantType} grant is not supported`);
  await next();
}
