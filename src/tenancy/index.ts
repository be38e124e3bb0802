import type { Context, Next } from 'koa';
import { DEFAULT_TENANT } from '../store/index.js';
import { badRequest } from '../http/errors.js';

export const TENANT_HEADER = 'x-tenant-id';
const TENANT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** True for a syntactically valid tenant id (letters, digits, dot, dash, underscore; at most 64). */
export function isTenantId(value: unknown): value is string {
  return typeof value === 'string' && TENANT_ID.test(value) && value !== DEFAULT_TENANT;
}

/**
 * Scopes the request to the tenant named by X-Tenant-Id (no header: the default tenant).
 * `ctx.state.tenant` is the store tenant; `ctx.state.tenantId` is what records carry (null for default).
 */
export async function tenancy(ctx: Context, next: Next): Promise<void> {
  const header = ctx.get(TENANT_HEADER);
  if (header !== '' && !isTenantId(header)) {
    throw badRequest('X-Tenant-Id must be 1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit');
  }
  ctx.state.tenantId = header || null;
  ctx.state.tenant = header || DEFAULT_TENANT;
  await next();
}

/** The store tenant of a record's tenantId. */
export function storeTenant(tenantId: string | null | undefined): string {
  return tenantId || DEFAULT_TENANT;
}
