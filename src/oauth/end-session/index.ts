import type { EventEmitter } from 'node:events';
import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import { DependencyUnavailableError, HttpError, isUnavailable } from '../../http/errors.js';
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

/**
 * The user's confirmation (`POST /session/end/confirm`, oidc-provider's form): where the session
 * ends and `end_session.success` is emitted, so where the logout waits for what it started.
 * Found 2026-11-29: only /session/end waited, which never ends a session itself; the confirmation
 * was answered before its tokens were revoked (seconds for a user with many), and a store fault
 * meanwhile was an unhandled rejection that ended the process.
 */
export const endSessionConfirmation: ArbiterMiddleware[] = [logoutSignalled];

/** What each logout answered by oidc-provider still has to finish before its answer goes out (atLogout). */
const pendingAtLogout = new WeakMap<object, Promise<unknown>[]>();

/**
 * What a user's logout at /session/end does besides ending the session: oidc-provider emits
 * `end_session.success` once the session is ended, still holding its account; the step below
 * waits for what was started, so the logout is answered once it is stored (or fails with it).
 * - What the session issued is revoked (revokeSessionGrants), at every client for a logout of the
 *   whole session, at the one client otherwise: oidc-provider revokes only the grant the session
 *   names last for each client, and here each authorization has a grant of its own.
 * - The logout is told to `userLoggedOut` (ProviderContext: the Shared Signals transmitter).
 */
export function atLogout(
  provider: Provider,
  tenant: string,
  revoke: (session: { accountId: string; uid: string; clientId?: string }) => Promise<unknown>,
  userLoggedOut: ((tenant: string, sub: string) => Promise<unknown>) | undefined,
): void {
  // Provider is an EventEmitter; its typings name no event.
  (provider as unknown as EventEmitter).on('end_session.success', (ctx: ArbiterContext) => {
    const oidc = (ctx as { oidc?: EndedSession }).oidc;
    const accountId = oidc?.session?.accountId;
    const uid = oidc?.session?.uid;
    if (typeof accountId !== 'string' || typeof uid !== 'string') return;
    const clientId = oidc?.params?.logout ? undefined : oidc?.entities?.Client?.clientId;
    const pending = [
      revoke({ accountId, uid, ...(clientId ? { clientId } : {}) }),
      ...(userLoggedOut ? [userLoggedOut(tenant, accountId)] : []),
    ];
    // Awaited by logoutSignalled, which answers a failure; never a rejection left unhandled should a route not wait.
    for (const work of pending) work.catch(() => undefined);
    pendingAtLogout.set(ctx, pending);
  });
}

/** What `end_session.success` leaves in ctx.oidc: the ended session, the logout's parameters, the client it named. */
interface EndedSession {
  session?: { accountId?: unknown; uid?: unknown };
  params?: { logout?: unknown };
  entities?: { Client?: { clientId?: string } };
}

async function logoutSignalled(ctx: ArbiterContext, next: Next): Promise<void> {
  await next();
  try {
    await Promise.all([...(pendingAtLogout.get(ctx) ?? []), logoutsKept(ctx)]);
  } catch (error) {
    if (!isUnavailable(error)) throw error;
    // oidc-provider ended the session before it said so: a retry finds none to end. Said as it is.
    throw new DependencyUnavailableError(
      'store',
      'the session has ended, but what it issued could not be revoked now: its tokens stay valid until they expire or an operator revokes them',
      `a logout's revocation failed: ${(error as Error).message}`,
    );
  }
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
