import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';
import { HttpError } from '../../http/errors.js';
import { authorizationRequestParameters } from './parameters.js';

/**
 * The spec makes redirect_uri required at /authorize, also for a client with a single
 * registered URI (where oidc-provider would take that one). Without it there is nowhere
 * verified to send an error to (RFC 6749 §4.1.2.1), so the refusal is answered here. A request
 * object or a pushed request must hold it (at /par too, where it is pushed); one that cannot be
 * read is oidc-provider's to refuse.
 */
export async function requireRedirectUri(ctx: ArbiterContext, next: Next): Promise<void> {
  if (['GET', 'POST'].includes(ctx.method) && ctx.state.requestObject !== null) {
    const redirectUri = authorizationRequestParameters(ctx).redirect_uri;
    if (typeof redirectUri !== 'string' || redirectUri === '')
      throw new HttpError(400, 'invalid_request', "missing required parameter 'redirect_uri'");
  }
  await next();
}
