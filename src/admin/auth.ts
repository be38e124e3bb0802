import type { Context, Next } from 'koa';
import { markAuthenticated, type AuditFacts } from '../audit/facts.js';
import { guardCredential } from '../http/auth-failures.js';
import { HttpError } from '../http/errors.js';
import type { AdminApiKeys, AdminKeyIdentity } from './api-keys.js';
import { permissionFor, roleMay, rolesWith } from './roles.js';

/**
 * Whom failed Admin keys count against. A wrong key names no key (keys are looked up by their
 * digest), so every Admin key shares this identity in the failure limiter, as the one key did.
 */
const ADMIN_KEY_IDENTITY = 'admin-key';

/**
 * Guards the Admin API with X-Admin-API-Key: the bootstrap key (SERVICE_ADMIN_API_KEY) or a named
 * key. The caller's identity goes to `ctx.state.adminKey` and into the call's audit entry.
 */
export function requireAdminKey(keys: AdminApiKeys) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const presented = ctx.get('x-admin-api-key');
    if (presented) await guardCredential(ctx, ADMIN_KEY_IDENTITY);
    const identity = presented ? await keys.identify(presented) : null;
    if (!identity) {
      ctx.set('WWW-Authenticate', 'X-Admin-API-Key');
      throw new HttpError(
        401,
        'unauthorized',
        presented ? 'the X-Admin-API-Key is not valid' : 'the X-Admin-API-Key header is required',
      );
    }
    ctx.state.adminKey = identity;
    markAuthenticated(ctx.state);
    const audit = ctx.state.audit as AuditFacts | undefined;
    if (audit) audit.adminKey = { id: identity.id, name: identity.name, role: identity.role };
    await next();
  };
}

/**
 * 403 `insufficient_scope` (the RFC 6750 §3.1 code for a valid credential that does not reach this
 * far) when the key's role lacks the permission of the operation at `route` (its router path under
 * /admin/api).
 */
export function assertRoleMay(ctx: Context, route: string): void {
  const caller = ctx.state.adminKey as AdminKeyIdentity;
  const needed = permissionFor(ctx.method, route);
  if (roleMay(caller.role, needed)) return;
  ctx.set('WWW-Authenticate', 'X-Admin-API-Key error="insufficient_scope"');
  throw new HttpError(
    403,
    'insufficient_scope',
    `the Admin API key ${JSON.stringify(caller.name)} has the role ${caller.role}; ${ctx.method} ${ctx.path} needs the role ${rolesWith(needed).join(' or ')}`,
  );
}
