import type { ParameterizedContext } from 'koa';
import type { AuditState } from '../audit/index.js';
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
}

/** The identity the Admin gate found for this call (src/admin/auth.ts). */
export function callerOf(ctx: AdminContext): AdminKeyIdentity {
  const caller = ctx.state.adminKey;
  if (!caller) throw new Error('an Admin API route ran without the Admin gate');
  return caller;
}
