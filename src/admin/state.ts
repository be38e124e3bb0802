import type { ParameterizedContext } from 'koa';
import { markAuthenticated, type AuditState } from '../audit/index.js';
import type { Tenant, TenantState } from '../tenancy/index.js';
import type { AdminRole } from './roles.js';

/**
 * The Admin API's part of `ctx.state`, beside the layers' it runs under (the request's, its
 * tenant's, its audit entry's): the caller the Admin gate found (auth.ts), set before any route runs.
 */
export type AdminState = Omit<TenantState, 'tenant'> &
  AuditState & {
    /** The tenant the root resolved, when the call named one (X-Tenant-Id, /t/<tenant>). */
    tenant?: Tenant;
    adminKey?: AdminKeyIdentity;
  };
export type AdminContext = ParameterizedContext<AdminState>;

/** Who an Admin API call is: an API key, or the operator a console session belongs to. */
export interface AdminKeyIdentity {
  /** The key's id; null for the bootstrap key (SERVICE_ADMIN_API_KEY). */
  id: number | null;
  name: string;
  role: AdminRole;
  /** The only tenants the key reaches (tenant ids; the default tenant is `_default`); absent: every tenant and the server. */
  tenants?: string[];
  /** A console session (sign-in.ts), not a key: its id is null as the bootstrap key's is, and it is not that key. */
  session?: true;
}

/** The identity the Admin gate found for this call (src/admin/auth.ts). */
export function callerOf(ctx: AdminContext): AdminKeyIdentity {
  const caller = ctx.state.adminKey;
  if (!caller) throw new Error('an Admin API route ran without the Admin gate');
  return caller;
}

/** The audit entry names who made the call: a key by id and name, a console session by its operator (never a secret). */
export function recordCaller(ctx: AdminContext, identity: AdminKeyIdentity): void {
  markAuthenticated(ctx.state);
  const audit = ctx.state.audit;
  if (audit)
    audit.adminKey = {
      id: identity.id,
      name: identity.name,
      role: identity.role,
      ...(identity.tenants ? { tenants: identity.tenants } : {}),
      ...(identity.session ? { session: true } : {}),
    };
}
