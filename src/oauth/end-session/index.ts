import { createHash, timingSafeEqual } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import { DependencyUnavailableError, HttpError, isUnavailable } from '../../http/errors.js';
import { asMatched, routes } from '../routes.js';
import { formBody, formParameter } from '../shared/form-body.js';
import { logoutsKept } from './backchannel.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';
import { requestIssuer, type Tenant } from '../../tenancy/index.js';
import type { Store } from '../../store/index.js';
import { revokeSessionGrants } from '../../../adapters/oidc/index.js';

export const END_SESSION_PATH = routes.end_session;
/** Where oidc-provider's logout form posts the user's answer, as its router matches paths. */
const CONFIRMATION_PATH = asMatched(`${END_SESSION_PATH}/confirm`);

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
 * Found 2026-11-29: the revocation ran only once oidc-provider had ended the session, so a store
 * fault left the session ended and its tokens valid, and a retry found no session to end. What
 * the session issued is now revoked first (revokedBeforeEnding), and once more after it ended.
 */
export function endSessionConfirmationMiddleware({
  store,
  providerFor,
  maxBodyBytes,
}: {
  store: Store;
  providerFor: (tenant: Tenant) => Provider;
  maxBodyBytes: number;
}): ArbiterMiddleware[] {
  return [formBody(maxBodyBytes), revokedBeforeEnding(store, providerFor), logoutSignalled];
}

/**
 * Whose tokens a confirmed logout ends: the whole session's when the user chose to sign out
 * (`logout`), else the one client's that the logout named (oidc-provider ends only that client's
 * part of the session), else nobody's ("No, stay signed in" to a logout that named no client).
 */
function sessionEnding(
  session: { accountId?: unknown; uid?: unknown },
  wholeSession: boolean,
  clientId: unknown,
): { accountId: string; uid: string; clientId?: string } | undefined {
  const { accountId, uid } = session;
  if (typeof accountId !== 'string' || typeof uid !== 'string') return undefined;
  if (wholeSession) return { accountId, uid };
  return typeof clientId === 'string' ? { accountId, uid, clientId } : undefined;
}

/**
 * Before oidc-provider ends the session its cookie names, what that session issued is revoked,
 * for a confirmation oidc-provider will accept (its form's xsrf secret, kept in the session). A
 * store fault is then a 503 with the session still there: the user signs out again once the
 * store answers. The sweep after it ended (atLogout) catches what was issued in between.
 */
function revokedBeforeEnding(store: Store, providerFor: (tenant: Tenant) => Provider): ArbiterMiddleware {
  return async (ctx, next) => {
    if (ctx.method !== 'POST' || asMatched(ctx.path) !== CONFIRMATION_PATH) return next();
    const provider = providerFor(ctx.state.tenant);
    const id = ctx.cookies.get(provider.cookieName('session'));
    const session = id ? await provider.Session.find(id) : undefined;
    const state = session?.state as { secret?: unknown; clientId?: unknown } | undefined;
    const ending =
      session && state && sameSecret(state.secret, formParameter(ctx, 'xsrf'))
        ? // An empty `logout` is none, as oidc-provider reads it ("No, stay signed in").
          sessionEnding(session, Boolean(formParameter(ctx, 'logout')), state.clientId)
        : undefined;
    if (ending) {
      try {
        await revokeSessionGrants(store, ctx.state.tenant.name, ending);
      } catch (error) {
        if (!isUnavailable(error)) throw error;
        throw new DependencyUnavailableError(
          'store',
          'what the session issued could not be revoked now, so it has not ended: sign out again in a moment',
          `a logout's revocation failed before the session ended: ${(error as Error).message}`,
        );
      }
    }
    await next();
  };
}

/** The logout form's xsrf value is the session's secret (compared as digests: in constant time, whatever their lengths). */
function sameSecret(kept: unknown, presented: string | undefined): boolean {
  if (typeof kept !== 'string' || presented === undefined) return false;
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(kept), digest(presented));
}

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
  { store, tenant }: { store: Store; tenant: string },
  userLoggedOut: ((tenant: string, sub: string) => Promise<unknown>) | undefined,
): void {
  // Provider is an EventEmitter; its typings name no event.
  (provider as unknown as EventEmitter).on('end_session.success', (ctx: ArbiterContext) => {
    const oidc = (ctx as { oidc?: EndedSession }).oidc;
    // Found 2026-11-29: "No, stay signed in" to a logout naming no client revoked the whole session's tokens.
    const ending = sessionEnding(oidc?.session ?? {}, Boolean(oidc?.params?.logout), oidc?.entities?.Client?.clientId);
    if (!ending) return;
    const pending = [
      revokeSessionGrants(store, tenant, ending),
      ...(userLoggedOut ? [userLoggedOut(tenant, ending.accountId)] : []),
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
    // What was issued between the revocation before oidc-provider ended the session and this one:
    // a retry finds no session to end. Said as it is.
    throw new DependencyUnavailableError(
      'store',
      'the session has ended, but what was issued while it ended could not be revoked now: those tokens stay valid until they expire or an operator revokes them',
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
