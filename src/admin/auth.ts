import type { Next } from 'koa';
import { credentialWasRight, guardCredential, nameCredential } from '../http/auth-failures.js';
import { HttpError } from '../http/errors.js';
import type { AdminApiKeys } from './api-keys.js';
import { DEFAULT_TENANT } from '../store/index.js';
import { CONSOLE_HEADER, SESSION_COOKIE, type AdminSessions } from './sign-in.js';
import { API_KEYS_SEGMENT, permissionFor, roleMay, rolesWith } from './roles.js';
import { callerOf, recordCaller, type AdminContext, type AdminKeyIdentity } from './state.js';

/**
 * Whom failed Admin keys count against. A wrong key names no key (keys are looked up by their
 * digest), so they share an identity in the failure limiter. A value that may be the bootstrap
 * key (SERVICE_ADMIN_API_KEY, chosen by an operator: 16 characters at least) is refused for
 * everyone, unverified, once such values failed too often from all addresses together. A value
 * shaped as a key Arbiter generated (256 random bits, never guessed) is always verified: found
 * 2026-11-29, wrong keys from ten addresses locked out every tenant's keys, not only the bootstrap key.
 */
const ADMIN_KEY_IDENTITY = 'admin-key';
const GENERATED_KEY_IDENTITY = 'admin-key generated';

/**
 * Guards the Admin API with X-Admin-API-Key: the bootstrap key (SERVICE_ADMIN_API_KEY) or a named
 * key. The caller's identity goes to `ctx.state.adminKey` and into the call's audit entry.
 */
export function requireAdminKey(keys: AdminApiKeys, sessions?: AdminSessions) {
  return async (ctx: AdminContext, next: Next): Promise<void> => {
    const presented = ctx.get('x-admin-api-key');
    if (presented && keys.mayBeBootstrap(presented)) await guardCredential(ctx, ADMIN_KEY_IDENTITY);
    else if (presented) nameCredential(ctx, GENERATED_KEY_IDENTITY);
    const session = !presented && sessions ? ctx.cookies.get(SESSION_COOKIE) : undefined;
    const identity = presented
      ? await keys.identify(presented)
      : session
        ? await sessionIdentity(ctx, sessions!, session)
        : null;
    if (!identity) {
      ctx.set('WWW-Authenticate', 'X-Admin-API-Key');
      throw new HttpError(
        401,
        'unauthorized',
        presented ? 'the X-Admin-API-Key is not valid' : 'the X-Admin-API-Key header is required',
      );
    }
    credentialWasRight(ctx);
    ctx.state.adminKey = identity;
    recordCaller(ctx, identity);
    await next();
  };
}

/**
 * Whom to count a wrong session cookie against, as with generated keys: a session is 256 random
 * bits, never guessed, so it is always verified (found 2026-11-30: wrong cookies from ten
 * addresses locked every signed-in operator out when sessions were refused unverified).
 */
const ADMIN_SESSION_IDENTITY = 'admin-session';

/**
 * The operator a console session cookie belongs to (sign-in.ts), or null. A write made with it
 * must carry the console's own header: a cross-site form or script cannot set one, so a session
 * cookie alone never writes (SameSite=Strict keeps it from other sites already; this holds even
 * where a browser does not honour that).
 */
async function sessionIdentity(ctx: AdminContext, sessions: AdminSessions, cookie: string) {
  nameCredential(ctx, ADMIN_SESSION_IDENTITY);
  const identity = await sessions.identify(cookie);
  if (identity && !['GET', 'HEAD'].includes(ctx.method) && !ctx.get(CONSOLE_HEADER))
    throw new HttpError(
      403,
      'access_denied',
      `a write signed in with the console's session must carry ${CONSOLE_HEADER}`,
    );
  return identity;
}

/**
 * 403 `insufficient_scope` (the RFC 6750 §3.1 code for a valid credential that does not reach this
 * far) when the key's role lacks the permission of the operation at `route` (its router path under
 * /admin/api).
 */
export function assertRoleMay(ctx: AdminContext, route: string): void {
  const caller = callerOf(ctx);
  const needed = permissionFor(ctx.method, route);
  if (roleMay(caller.role, needed)) return;
  ctx.set('WWW-Authenticate', 'X-Admin-API-Key error="insufficient_scope"');
  throw new HttpError(
    403,
    'insufficient_scope',
    `the Admin API key ${JSON.stringify(caller.name)} has the role ${caller.role}; ${ctx.method} ${ctx.path} needs the role ${rolesWith(needed).join(' or ')}`,
  );
}

/**
 * 403 for a write (create, replace, delete) of the identity provider the console signs operators
 * in with (ADMIN_SIGN_IN_IDP, a record of the default tenant) by a caller without the admin role's
 * `manage-keys`, or by a key confined to tenants: whoever sets its issuer or endpoints decides who
 * signs in, and ADMIN_SIGN_IN_GRANTS may give them any role, so an operator (or an admin key
 * confined to the default tenant) could otherwise make itself an unconfined admin. Called where the
 * body is read, so that a create is seen too, with the tenant the write is aimed at (body, query or
 * header).
 */
export function assertSignInIdpKept(
  ctx: AdminContext,
  signInIdp: string | null,
  write: { collection: string; tenantId: string | null; key: unknown },
): void {
  if (signInIdp === null || write.collection !== 'identity-providers' || write.key !== signInIdp) return;
  if ((write.tenantId ?? DEFAULT_TENANT) !== DEFAULT_TENANT) return;
  // Who may make API keys (server-wide, so never a key confined to tenants) may decide who signs in.
  const caller = callerOf(ctx);
  if (roleMay(caller.role, 'manage-keys') && !caller.tenants) return;
  ctx.set('WWW-Authenticate', 'X-Admin-API-Key error="insufficient_scope"');
  throw new HttpError(
    403,
    'insufficient_scope',
    `the identity provider ${JSON.stringify(signInIdp)} signs operators in to the console (ADMIN_SIGN_IN_IDP): ${ctx.method} ${ctx.path} needs the role ${rolesWith('manage-keys').join(' or ')}, on a key not confined to tenants`,
  );
}

/**
 * A write that names a tenant not made yet makes it (src/records registers it), which is what
 * POST /tenants does: it needs that call's permission, `operate`. A policy author writes policy
 * of the tenants that exist.
 */
export function assertMayMakeTenant(ctx: AdminContext, tenantId: string): void {
  if (roleMay(callerOf(ctx).role, 'operate')) return;
  ctx.set('WWW-Authenticate', 'X-Admin-API-Key error="insufficient_scope"');
  throw new HttpError(
    403,
    'insufficient_scope',
    `tenant ${JSON.stringify(tenantId)} does not exist: a write that makes it (as POST /tenants does) needs the role ${rolesWith('operate').join(' or ')}`,
  );
}

/** The tenant a call names before its body is read: `tenantId` in the query, else X-Tenant-Id; null: the default. */
function callTenantOf(ctx: AdminContext): string | null {
  const fromQuery = typeof ctx.query.tenantId === 'string' && ctx.query.tenantId !== '' ? ctx.query.tenantId : null;
  return fromQuery ?? ctx.state.tenant?.id ?? null;
}

/**
 * Operations that act on the server as a whole, never on one tenant: a key confined to tenants
 * gets none of them (its own GET /api-keys/current aside). The outbox is every tenant's (its
 * failing entries name their tenants): a confined key reads its tenant's part at GET /signals/streams.
 */
const SERVER_WIDE_SEGMENTS = new Set([API_KEYS_SEGMENT, 'tenants', 'policy-shadow', 'policy-impact', 'outbox']);
/** Records whose default (no tenant) is shared by every tenant: the bundle's policy. */
const SHARED_BY_DEFAULT_SEGMENTS = new Set(['policy-rules', 'policy-data']);

/**
 * A key confined to tenants (`tenants` on its record) reaches only calls aimed at one of them:
 * 403 for a server-wide operation, for `allTenants=true`, and for a call whose tenant
 * (`tenantId` in the query, else X-Tenant-Id, else the default tenant) is not among them. A
 * `tenantId` in a body is checked where the body is read (assertTenantReached).
 */
export function assertTenantConfinement(ctx: AdminContext, route: string): void {
  const caller = callerOf(ctx);
  if (!caller.tenants) return;
  const [segment = '', second] = route.split('/').filter(Boolean);
  const ownKey = segment === API_KEYS_SEGMENT && second === 'current';
  if ((SERVER_WIDE_SEGMENTS.has(segment) && !ownKey) || ctx.query.allTenants === 'true')
    throw confined(ctx, caller, 'a server-wide operation');
  const tenantId = callTenantOf(ctx);
  if (tenantId === null && SHARED_BY_DEFAULT_SEGMENTS.has(segment)) throw confined(ctx, caller, 'the shared policy');
  assertTenantReached(ctx, tenantId);
}

/** 403 when the caller's key is confined to tenants and `tenantId` (null: the default tenant, or shared records) is not one of them. */
export function assertTenantReached(ctx: AdminContext, tenantId: string | null): void {
  const caller = ctx.state.adminKey;
  if (!caller?.tenants || caller.tenants.includes(tenantId ?? DEFAULT_TENANT)) return;
  throw confined(ctx, caller, `tenant ${JSON.stringify(tenantId ?? DEFAULT_TENANT)}`);
}

function confined(ctx: AdminContext, caller: AdminKeyIdentity, what: string): HttpError {
  ctx.set('WWW-Authenticate', 'X-Admin-API-Key error="insufficient_scope"');
  return new HttpError(
    403,
    'insufficient_scope',
    `the Admin API key ${JSON.stringify(caller.name)} is confined to the tenants ${caller.tenants!.join(', ')}; ${ctx.method} ${ctx.path} is ${what}`,
  );
}
