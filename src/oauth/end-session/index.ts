import type { EventEmitter } from 'node:events';
import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import { HttpError } from '../../http/errors.js';
import { routes } from '../routes.js';
import { formBody } from '../shared/form-body.js';
import { logoutsKept } from './backchannel.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';
import { requestIssuer } from '../../tenancy/index.js';

export const END_SESSION_PATH = routes.end_session;

/**
 * What Arbiter adds at the logout endpoint: RP-Initiated Logout 1.0 §2 requires the OP to accept
 * the logout request by GET and by POST (form serialization); oidc-provider routes only GET.
 *
 * oidc-provider answers POST itself only with `enableHttpPostMethods`, which it allows only with
 * SameSite=None session cookies, since a cross-site POST does not carry a Lax cookie and the logout
 * would not find the session it is to end. That would weaken every flow's CSRF protection and need
 * Secure cookies (https) even in development. Instead a POST is answered with 303 See Other to the
 * same endpoint with the form's parameters as its query (RFC 9110 §15.4.4): the browser follows
 * with a GET, a top-level navigation that carries the Lax session cookie, and oidc-provider answers
 * it as the GET logout request it is. The form is read with the size limit, a parameter given
 * twice is refused (formBody), and the parameters are oidc-provider's to check on the GET.
 */
export function endSessionMiddleware({
  issuer,
  maxBodyBytes,
}: {
  issuer: string;
  maxBodyBytes: number;
}): ArbiterMiddleware[] {
  return [formBody(maxBodyBytes), logoutPostAsGet(issuer), logoutSignalled];
}

/** What each logout answered by oidc-provider still has to finish before its answer goes out (signalLogouts). */
const pendingLogoutSignals = new WeakMap<object, Promise<unknown>>();

/**
 * A user's logout at /session/end told to `userLoggedOut` (ProviderContext): oidc-provider emits
 * `end_session.success` once the session is ended, still holding its account; the step below
 * waits for what was started, so the logout is answered once it is stored (or fails with it).
 */
export function signalLogouts(
  provider: Provider,
  tenant: string,
  userLoggedOut: ((tenant: string, sub: string) => Promise<unknown>) | undefined,
): void {
  if (!userLoggedOut) return;
  // Provider is an EventEmitter; its typings name no event.
  (provider as unknown as EventEmitter).on('end_session.success', (ctx: ArbiterContext) => {
    const sub = (ctx as { oidc?: { session?: { accountId?: unknown } } }).oidc?.session?.accountId;
    if (typeof sub === 'string') pendingLogoutSignals.set(ctx, userLoggedOut(tenant, sub));
  });
}

async function logoutSignalled(ctx: ArbiterContext, next: Next): Promise<void> {
  await next();
  await Promise.all([pendingLogoutSignals.get(ctx), logoutsKept(ctx)]);
}

function logoutPostAsGet(issuer: string) {
  return async (ctx: ArbiterContext, next: Next): Promise<void> => {
    if (ctx.method !== 'POST') return next();
    const endpoint = `${requestIssuer(issuer, ctx.state.tenant)}${END_SESSION_PATH}`;
    if (!ctx.state.body) {
      throw new HttpError(
        400,
        'invalid_request',
        'a logout request by POST is form-serialized (application/x-www-form-urlencoded)',
      );
    }
    const query = new URLSearchParams(
      Object.entries(ctx.state.body).map(([name, value]): [string, string] => [name, String(value)]),
    ).toString();
    ctx.status = 303;
    ctx.redirect(query ? `${endpoint}?${query}` : endpoint);
  };
}
