import type { Middleware, Next, ParameterizedContext } from 'koa';
import { DEFAULT_TENANT, type Store, type StoredDoc } from '../store/index.js';
import { HttpError, badRequest } from '../http/errors.js';
import type { RequestState } from '../http/state.js';

export const TENANT_HEADER = 'x-tenant-id';
const TENANT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The registry of tenants that exist: one document per tenant id, in the default tenant. */
export const TENANTS_COLLECTION = { name: 'tenants' };

/**
 * The tenant a request (or a record) belongs to, as one value. `name` is how the store and the
 * policy input name it (`_default` for the default tenant); `id` is what records carry in
 * their `tenantId` and what X-Tenant-Id says (null for the default tenant).
 */
export interface Tenant {
  readonly name: string;
  readonly id: string | null;
}

/** The tenant of a record's tenantId or of an X-Tenant-Id (none: the default tenant). */
export function tenantOf(id: string | null | undefined): Tenant {
  return { name: storeTenant(id), id: id || null };
}

/** `ctx.state` once `tenancy` has run. */
export type TenantState = RequestState & {
  tenant: Tenant;
  /** Set when X-Tenant-Id names no tenant: the audit log counts these instead of writing each. */
  tenantUnknown?: boolean;
};

/** True for a syntactically valid tenant id (letters, digits, dot, dash, underscore; at most 64). */
export function isTenantId(value: unknown): value is string {
  return typeof value === 'string' && TENANT_ID.test(value) && value !== DEFAULT_TENANT;
}

/**
 * Scopes the request to the tenant named by X-Tenant-Id (no header: the default tenant) in
 * `ctx.state.tenant`. Only the syntax is checked here: whether the tenant exists is
 * `requireKnownTenant`'s concern.
 */
export async function tenancy(ctx: ParameterizedContext<TenantState>, next: Next): Promise<void> {
  const header = ctx.get(TENANT_HEADER);
  if (header !== '' && !isTenantId(header)) {
    throw badRequest('X-Tenant-Id must be 1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit');
  }
  ctx.state.tenant = tenantOf(header);
  await next();
}

/** The store tenant of a record's tenantId. */
export function storeTenant(tenantId: string | null | undefined): string {
  return tenantId || DEFAULT_TENANT;
}

/**
 * The tenancy model: the default tenant always exists; another tenant exists once it is listed
 * in configuration (TENANTS) or the Admin API has created an object for it, and from then on.
 * Known tenants are remembered in memory (there are as many as operators created); an unknown
 * id is looked up in the store each time and never remembered, so that made-up ids cost no memory.
 */
export class TenantRegistry {
  private readonly known: Set<string>;

  constructor(
    private readonly store: Store,
    configured: string[],
  ) {
    this.known = new Set([DEFAULT_TENANT, ...configured]);
  }

  async exists(tenant: string): Promise<boolean> {
    if (this.known.has(tenant)) return true;
    const found = await this.store.collection(TENANTS_COLLECTION, DEFAULT_TENANT).get(tenant);
    if (found) this.known.add(tenant);
    return found !== null;
  }
}

/** Records that a tenant exists (idempotent); called by the Admin API before it writes a tenant's first object. */
export async function registerTenant(store: Store, tenantId: string | null): Promise<void> {
  if (!tenantId) return;
  const tenants = store.collection<StoredDoc>(TENANTS_COLLECTION, DEFAULT_TENANT);
  if (await tenants.get(tenantId)) return;
  await tenants.upsert({ id: tenantId, createdAt: new Date().toISOString() });
}

/** Refuses requests for a tenant that does not exist, before anything is built or cached for it. */
export function requireKnownTenant(registry: TenantRegistry): Middleware<TenantState> {
  return async (ctx, next) => {
    if (!(await registry.exists(ctx.state.tenant.name))) {
      ctx.state.tenantUnknown = true;
      throw new HttpError(400, 'invalid_request', 'X-Tenant-Id names no tenant of this server', {
        field: 'X-Tenant-Id',
      });
    }
    await next();
  };
}
