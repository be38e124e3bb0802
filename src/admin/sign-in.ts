import { randomBytes } from 'node:crypto';
import type { Next } from 'koa';
import type { Config } from '../config/index.js';
import { secureCookie } from '../http/cookies.js';
import { SIGN_IN_CALLBACK_PATH, SIGN_IN_PATH, SIGN_OUT_PATH } from '../http/admin-path.js';
import { HttpError, notFound, unsupportedMethod } from '../http/errors.js';
import { outboundOptionsOf } from '../http/outbound.js';
import type { Logger } from '../log/index.js';
import {
  enabledIdentityProvider,
  identityProviderEnabled,
  newChecks,
  SignInError,
  UpstreamProviders,
} from '../oauth/index.js';
import {
  DEFAULT_TENANT,
  openedWith,
  sealedFor,
  storageDigest,
  type Sealer,
  type Store,
  type StoredDoc,
} from '../store/index.js';
import { auditFactsOf, markAuthenticated, withdrawableIfUnaudited } from '../audit/index.js';
import { ADMIN_ROLES, type AdminRole } from './roles.js';
import { recordCaller, type AdminContext, type AdminKeyIdentity } from './state.js';
import { ADMIN_SESSIONS_COLLECTION } from './collections.js';

/**
 * Operators sign in to the console as they do elsewhere: through an upstream OpenID Connect
 * provider (ADMIN_SIGN_IN_IDP, an identity provider of the default tenant), code flow with state,
 * nonce and PKCE S256, the ID token verified by openid-client. Their role and tenants come from a
 * claim (ADMIN_SIGN_IN_CLAIM) mapped by ADMIN_SIGN_IN_GRANTS; an operator the mapping gives
 * nothing is refused. A sign-in under way is stored nowhere: its nonce and PKCE verifier travel
 * in a cookie for the callback only, sealed for the holder of its state (anyone may load
 * /admin/sign-in, and nothing they do there grows the store). The sign-in makes a session: 32 random bytes in an HttpOnly, SameSite=Strict
 * cookie scoped to /admin, its SHA-256 digest in the store (every node knows it; a copy of the
 * store holds no usable session), ending after ADMIN_SESSION_SECONDS or at sign-out. The Admin
 * API takes the cookie where no X-Admin-API-Key is sent (auth.ts), writes only with the console's
 * own header, which no other site can make a browser send.
 */
export { SIGN_IN_PATH, SIGN_IN_CALLBACK_PATH, SIGN_OUT_PATH };
export const SESSION_COOKIE = 'arbiter_admin_session';
/** Set by /admin/sign-in for its callback only: the sign-in's checks, sealed for its state (pendingCookie). */
const SIGN_IN_COOKIE = 'arbiter_admin_sign_in';
/** Sent by the console with every call made with its session cookie (a write without it is refused). */
export const CONSOLE_HEADER = 'x-arbiter-console';

/**
 * A session, keyed by the digest of its cookie. (Rows of `kind: 'pending'`, sign-ins under way
 * stored by earlier versions, are no session and expire with the purge.)
 */
type SessionDoc = StoredDoc & {
  id: string;
  expiresAt: number;
  kind: 'session';
  name: string;
  /** The identity provider the operator signed in at (ADMIN_SIGN_IN_IDP then). */
  idpId?: string;
  /** The value of ADMIN_SIGN_IN_CLAIM whose ADMIN_SIGN_IN_GRANTS entry gave the role. */
  grantedBy?: string;
};

/** The operator a session is opened for. */
interface SignedInOperator {
  name: string;
  idpId: string;
  grantedBy: string;
}

/** How long a sign-in may take at the upstream provider. */
const PENDING_MS = 10 * 60_000;

/**
 * The console's sessions. A session stands while what opened it still would: found 2026-11-30, a
 * session outlived its operator's removal from ADMIN_SIGN_IN_GRANTS, the identity provider's
 * disabling and console sign-in being turned off, for up to ADMIN_SESSION_SECONDS (7 days at
 * most), and nothing could end it. Each use now checks that ADMIN_SIGN_IN_IDP still names the
 * provider it was opened at, that the provider is enabled, and takes the role and tenants the
 * grants give the operator's claim value now.
 */
export class AdminSessions {
  constructor(
    private readonly store: Store,
    private readonly config: Pick<Config, 'adminSessionSeconds' | 'adminSignInIdp' | 'adminSignInGrants'>,
  ) {}

  private collection() {
    return this.store.collection<SessionDoc>(ADMIN_SESSIONS_COLLECTION, DEFAULT_TENANT);
  }

  /** The identity of a session cookie's value, or null when it is none (expired, signed out, made up, no longer granted). */
  async identify(cookie: string): Promise<AdminKeyIdentity | null> {
    const found = await this.collection().get(storageDigest(cookie));
    if (!found || found.kind !== 'session' || found.expiresAt <= Date.now()) return null;
    // Sessions of earlier versions name neither: their operators sign in again.
    if (!found.idpId || found.idpId !== this.config.adminSignInIdp || found.grantedBy === undefined) return null;
    const grant = grantFor(found.grantedBy, this.config.adminSignInGrants);
    if (!grant) return null;
    if (!(await identityProviderEnabled(this.store, DEFAULT_TENANT, found.idpId))) return null;
    return { id: null, session: true, name: found.name, ...grant };
  }

  /** A new session for this operator; answers the cookie's value. */
  async open(operator: SignedInOperator): Promise<string> {
    const cookie = randomBytes(32).toString('base64url');
    await this.collection().insert({
      id: storageDigest(cookie),
      kind: 'session',
      ...operator,
      expiresAt: Date.now() + this.config.adminSessionSeconds * 1000,
    });
    return cookie;
  }

  async close(cookie: string): Promise<void> {
    await this.collection().delete(storageDigest(cookie));
  }
}

export interface SignInDeps {
  config: Config;
  store: Store;
  sealer: Sealer;
  sessions: AdminSessions;
  log: Logger;
}

/** GET /admin/sign-in, GET /admin/sign-in/callback and POST /admin/sign-out. */
export function adminSignIn(deps: SignInDeps) {
  const upstream = new UpstreamProviders({ outbound: outboundOptionsOf(deps.config) });
  const redirectUri = `${deps.config.issuer}${SIGN_IN_CALLBACK_PATH}`;
  return async (ctx: AdminContext, next: Next): Promise<void> => {
    if (![SIGN_IN_PATH, SIGN_IN_CALLBACK_PATH, SIGN_OUT_PATH].includes(ctx.path)) return next();
    const secure = secureCookie(ctx, deps.config.issuer);
    const signInCookie = { path: SIGN_IN_CALLBACK_PATH, httpOnly: true, sameSite: 'lax', secure } as const;
    if (ctx.path === SIGN_OUT_PATH) {
      if (ctx.method !== 'POST') throw unsupportedMethod();
      // As every write of a console session: another site can post a form here, never send this header.
      if (!ctx.get(CONSOLE_HEADER))
        throw new HttpError(403, 'access_denied', `a sign-out must carry ${CONSOLE_HEADER}, as the console sends it`);
      const cookie = ctx.cookies.get(SESSION_COOKIE);
      // The audit entry names whose session ended (sign-outs without one are counted per address).
      const operator = cookie ? await deps.sessions.identify(cookie) : null;
      if (operator) recordCaller(ctx, operator);
      if (cookie) await deps.sessions.close(cookie);
      ctx.cookies.set(SESSION_COOKIE, '', { path: '/admin', httpOnly: true, sameSite: 'strict', secure, maxAge: 0 });
      ctx.status = 204;
      return;
    }
    if (ctx.method !== 'GET') throw unsupportedMethod();
    const idpId = deps.config.adminSignInIdp;
    if (!idpId) throw notFound('console sign-in is not configured (ADMIN_SIGN_IN_IDP)');
    const idp = await enabledIdentityProvider(deps.store, deps.sealer, DEFAULT_TENANT, idpId);
    if (!idp)
      throw new HttpError(
        503,
        'temporarily_unavailable',
        `ADMIN_SIGN_IN_IDP names no enabled identity provider of the default tenant (${idpId})`,
      );
    if (ctx.path === SIGN_IN_PATH) {
      const checks = newChecks();
      // Ties the sign-in to this browser: Lax, as the identity provider's redirect back is a cross-site navigation.
      ctx.cookies.set(SIGN_IN_COOKIE, pendingCookie(checks), { ...signInCookie, maxAge: PENDING_MS });
      ctx.redirect((await upstream.authorizationUrl(idp, redirectUri, checks, { prompt: [] })).href);
      return;
    }
    const state = typeof ctx.query.state === 'string' ? ctx.query.state : '';
    const checks = state ? checksOf(state, ctx.cookies.get(SIGN_IN_COOKIE)) : null;
    ctx.cookies.set(SIGN_IN_COOKIE, '', { ...signInCookie, maxAge: 0 });
    if (!checks)
      throw new HttpError(
        400,
        'invalid_request',
        'this sign-in is unknown, finished, expired or was begun in another browser; sign in again',
      );
    const claims = await upstream
      .claims(idp, new URL(ctx.originalUrl, deps.config.issuer), { state, ...checks })
      .catch((error: unknown) => {
        if (error instanceof SignInError) throw new HttpError(403, error.error, error.message);
        throw error;
      });
    const grantedBy = grantingValue(claims[deps.config.adminSignInClaim], deps.config.adminSignInGrants);
    const grant = grantedBy === null ? null : grantFor(grantedBy, deps.config.adminSignInGrants);
    const name = `${idpId}:${claims.sub}`;
    if (grantedBy === null || !grant) {
      // Signed in at the identity provider, so named in full in the audit entry of the refusal.
      markAuthenticated(ctx.state);
      auditFactsOf(ctx.state).result = { operator: name };
      deps.log.warn({ operator: name }, 'console sign-in refused: no ADMIN_SIGN_IN_GRANTS entry for the operator');
      throw new HttpError(403, 'access_denied', `${name} signed in, but ADMIN_SIGN_IN_GRANTS gives them no role`);
    }
    const cookie = await deps.sessions.open({ name, idpId, grantedBy });
    // No session without its audit entry (found 2026-11-29: a sign-in answered 503 still worked).
    withdrawableIfUnaudited(() => deps.sessions.close(cookie));
    recordCaller(ctx, { id: null, session: true, name, ...grant });
    ctx.cookies.set(SESSION_COOKIE, cookie, {
      path: '/admin',
      httpOnly: true,
      sameSite: 'strict',
      secure,
      maxAge: deps.config.adminSessionSeconds * 1000,
    });
    ctx.status = 303;
    ctx.redirect('/admin?signed-in=session');
  };
}

/** The sign-in cookie: the checks of a sign-in begun, sealed for the holder of its state, with their end. */
export function pendingCookie(checks: { state: string; nonce: string; codeVerifier: string }): string {
  const { nonce, codeVerifier } = checks;
  return sealedFor(checks.state, JSON.stringify({ nonce, codeVerifier, expiresAt: Date.now() + PENDING_MS }));
}

/**
 * The checks of the sign-in `state` began in this browser: none where its cookie is missing,
 * expired or was sealed for another state (login CSRF: an attacker's own sign-in finished in an
 * operator's browser brings his state, never his cookie). A callback replayed with a kept cookie
 * brings a code the identity provider has redeemed already.
 */
export function checksOf(state: string, cookie: string | undefined): { nonce: string; codeVerifier: string } | null {
  const opened = cookie === undefined ? null : openedWith(state, cookie);
  if (opened === null) return null;
  const { nonce, codeVerifier, expiresAt } = JSON.parse(opened) as {
    nonce: string;
    codeVerifier: string;
    expiresAt: number;
  };
  return expiresAt > Date.now() ? { nonce, codeVerifier } : null;
}

/** The first value of the operator's claim that ADMIN_SIGN_IN_GRANTS gives a role, or null. */
function grantingValue(claim: unknown, grants: Config['adminSignInGrants']): string | null {
  const values = typeof claim === 'string' ? [claim] : Array.isArray(claim) ? claim : [];
  for (const value of values) if (typeof value === 'string' && grantFor(value, grants)) return value;
  return null;
}

/** The role (and tenants) ADMIN_SIGN_IN_GRANTS gives one claim value, or null. */
function grantFor(value: string, grants: Config['adminSignInGrants']): { role: AdminRole; tenants?: string[] } | null {
  const grant = Object.hasOwn(grants, value) ? grants[value] : undefined;
  if (!grant || !ADMIN_ROLES.includes(grant.role)) return null;
  return { role: grant.role, ...(grant.tenants ? { tenants: grant.tenants } : {}) };
}
