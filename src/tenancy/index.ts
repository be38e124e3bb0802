import type { Middleware, Next, ParameterizedContext } from 'koa';
import { DEFAULT_TENANT, type Store, type StoredDoc } from '../store/index.js';
import { HttpError, badRequest, notFound } from '../http/errors.js';
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
  /**
   * `/t/<id>` when the request reached the tenant by its path (tenantPaths): it is answered under
   * the tenant's own issuer, ISSUER + path (requestIssuer). Absent for X-Tenant-Id and for records.
   */
  readonly path?: string;
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
  /** Set by tenantPaths for a request at /t/<tenant>/…: that base path. */
  tenantPath?: string;
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
  const tenant = tenantOf(header);
  ctx.state.tenant = ctx.state.tenantPath ? { ...tenant, path: ctx.state.tenantPath } : tenant;
  await next();
}

/** The issuer a request is answered under: ISSUER, or the tenant's own (ISSUER/t/<tenant>) when it came by path. */
export function requestIssuer(issuer: string, tenant: Tenant): string {
  return tenant.path ? `${issuer}${tenant.path}` : issuer;
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
      const named = ctx.state.tenant.path ? `${ctx.state.tenant.path} names` : 'X-Tenant-Id names';
      throw new HttpError(400, 'invalid_request', `${named} no tenant of this server`, {
        field: ctx.state.tenant.path ? 'path' : 'X-Tenant-Id',
      });
    }
    await next();
  };
}

/** A tenant's own base path: `/t/<tenant>`. */
export const TENANT_PATH_PREFIX = '/t/';
const TENANT_PATH = /^\/t\/([^/]*)(\/.*)?$/;

/**
 * Tenants as paths: `/t/<tenant>/<endpoint>` is the request `/<endpoint>` with `X-Tenant-Id:
 * <tenant>`, answered under the tenant's own issuer `<ISSUER>/t/<tenant>` (its discovery document,
 * JWKS, endpoints and browser sign-in), so that a tenant's users and clients need no proxy that
 * adds the header (as Keycloak's realms, and AuthZEN's tenant paths in src/authzen, do).
 *
 * - A path and an X-Tenant-Id naming different tenants: 400. A malformed tenant: 400.
 * - `reserved(path)` names what is not a protocol endpoint and has no tenant form (the admin
 *   surface, /metrics, the probes, the policy bundle): 404 under /t/, as a path naming nothing.
 * - oidc-provider builds the URLs it publishes and redirects to below the base (Koa's
 *   `ctx.mountPath`, which it reads); Arbiter's own redirects to paths (`/interaction/…`) get the
 *   base put in front on the way out.
 *
 * Mount it first (before the listener split, the metrics and the audit trail), so that everything
 * after sees the endpoint's own path and the tenant, and the access log the path as requested.
 * Answers its refusals itself: it runs before the JSON error handler.
 */
export function tenantPaths(reserved: (path: string) => boolean) {
  return async (ctx: ParameterizedContext<TenantState>, next: Next): Promise<void> => {
    const match = TENANT_PATH.exec(ctx.path);
    if (!match) return next();
    const [, id, rest = '/'] = match;
    const refusal = refusalOf(ctx, id, rest, reserved);
    if (refusal) {
      ctx.status = refusal.status;
      ctx.body = { error: refusal.code, error_description: refusal.message };
      return;
    }
    const base = `${TENANT_PATH_PREFIX}${id}`;
    ctx.request.headers[TENANT_HEADER] = id;
    ctx.state.tenantPath = base;
    (ctx as { mountPath?: string }).mountPath = base;
    const asked = ctx.path;
    ctx.path = rest;
    try {
      await next();
    } finally {
      ctx.path = asked;
    }
    const location = String(ctx.response.get('Location') ?? '');
    if (location.startsWith('/') && !location.startsWith('//') && !location.startsWith(`${base}/`))
      ctx.set('Location', `${base}${location}`);
  };
}

function refusalOf(
  ctx: ParameterizedContext<TenantState>,
  id: string,
  rest: string,
  reserved: (path: string) => boolean,
): HttpError | null {
  if (!isTenantId(id))
    return new HttpError(
      400,
      'invalid_request',
      'the path names no tenant: /t/<tenant>/… takes 1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit',
    );
  const header = ctx.get(TENANT_HEADER);
  if (header !== '' && header !== id)
    return new HttpError(400, 'invalid_request', 'the path and X-Tenant-Id name different tenants');
  if (reserved(rest)) return notFound('no such endpoint');
  return null;
}
