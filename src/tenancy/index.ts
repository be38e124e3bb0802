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

/** Tenancy's part of `ctx.state`: filled once, at the root (src/routes.ts), for the surfaces that have a tenant. */
export type TenantState = RequestState & {
  tenant: Tenant;
  /** Set when the tenant named does not exist: the audit log counts these instead of writing each. */
  tenantUnknown?: boolean;
};

/** True for a syntactically valid tenant id (letters, digits, dot, dash, underscore; at most 64). */
export function isTenantId(value: unknown): value is string {
  return typeof value === 'string' && TENANT_ID.test(value) && value !== DEFAULT_TENANT;
}

/**
 * The tenant a request names: by its path (`byPath`, see tenantPathOf) or by X-Tenant-Id (none:
 * the default tenant). Only the syntax is checked here: whether the tenant exists is
 * `requireKnownTenant`'s concern.
 */
export function requestTenant(header: string, byPath: TenantPath | null): Tenant {
  if (byPath) return { ...tenantOf(byPath.id), ...(byPath.base ? { path: byPath.base } : {}) };
  if (header !== '' && !isTenantId(header)) {
    throw badRequest('X-Tenant-Id must be 1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit');
  }
  return tenantOf(header);
}

/** The issuer a request is answered under: ISSUER, or the tenant's own (ISSUER/t/<tenant>) when it came by path. */
export function requestIssuer(issuer: string, tenant: Tenant): string {
  return tenant.path ? `${issuer}${tenant.path}` : issuer;
}

/**
 * Both issuers a tenant's tokens are issued under: the shared one (X-Tenant-Id) and, for a named
 * tenant, its own (ISSUER/t/<tenant>); one tenant, the same records under each.
 */
export function issuersOfTenant(issuer: string, tenant: Tenant): string[] {
  return tenant.id ? [issuer, `${issuer}${TENANT_PATH_PREFIX}${tenant.id}`] : [issuer];
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

/** Whether a write naming `tenantId` would make a new tenant (the default one always exists). */
export async function isNewTenant(store: Store, tenantId: string | null): Promise<boolean> {
  if (!tenantId || tenantId === DEFAULT_TENANT) return false;
  return (await store.collection<StoredDoc>(TENANTS_COLLECTION, DEFAULT_TENANT).get(tenantId)) === null;
}

/** Records that a tenant exists (idempotent); called by the Admin API before it writes a tenant's first object. */
export async function registerTenant(store: Store, tenantId: string | null): Promise<void> {
  if (!(await isNewTenant(store, tenantId))) return;
  await store
    .collection<StoredDoc>(TENANTS_COLLECTION, DEFAULT_TENANT)
    .upsert({ id: tenantId!, createdAt: new Date().toISOString() });
}

/** Refuses a request for a tenant that does not exist, before anything is built or cached for it. */
export async function assertKnownTenant(registry: TenantRegistry, state: TenantState): Promise<void> {
  if (await registry.exists(state.tenant.name)) return;
  state.tenantUnknown = true;
  const named = state.tenant.path ? `${state.tenant.path} names` : 'X-Tenant-Id names';
  throw new HttpError(400, 'invalid_request', `${named} no tenant of this server`, {
    field: state.tenant.path ? 'path' : 'X-Tenant-Id',
  });
}

/** A tenant's own base path: `/t/<tenant>`. */
export const TENANT_PATH_PREFIX = '/t/';
const TENANT_PATH = /^\/t\/([^/]*)(\/.*)?$/;

/** A tenant named by the request's path: its id, the base its issuer has (`/t/<id>`; none for AuthZEN's form) and the endpoint's path below it. */
export interface TenantPath {
  id: string;
  base?: string;
  rest: string;
}

/**
 * Tenants as paths: `/t/<tenant>/<endpoint>` is the request `/<endpoint>` with `X-Tenant-Id:
 * <tenant>`, answered under the tenant's own issuer `<ISSUER>/t/<tenant>` (its discovery document,
 * JWKS, endpoints and browser sign-in), so that a tenant's users and clients need no proxy that
 * adds the header (as Keycloak's realms, and AuthZEN's tenant paths in src/authzen, do).
 * A malformed tenant, or a path and an X-Tenant-Id naming different tenants: a 400 (thrown).
 * The root (src/routes.ts) runs the endpoint's route with `rest` as its path, answers 404 for a
 * route that has no tenant form (the admin surface, /metrics, the probes, the policy bundle), and
 * puts the base in front of Arbiter's own redirects to paths (`/interaction/…`); oidc-provider
 * builds the URLs it publishes below the base itself (Koa's `ctx.mountPath`, which it reads).
 */
export function tenantPathOf(path: string, header: string): TenantPath | null {
  const match = TENANT_PATH.exec(belowTenantOfWellKnown(path));
  if (!match) return null;
  const [, id, rest = '/'] = match;
  if (!isTenantId(id))
    throw badRequest(
      'the path names no tenant: /t/<tenant>/… takes 1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit',
    );
  return { id: sameTenant(id, header), base: `${TENANT_PATH_PREFIX}${id}`, rest };
}

/**
 * RFC 8414 §3.1 (and AuthZEN 1.0 §9.2, which follows it): the metadata of an issuer with a path
 * is at `/.well-known/<document>` inserted before that path, so a client that knows the tenant's
 * issuer `<ISSUER>/t/<tenant>` asks `/.well-known/<document>/t/<tenant>`. That request is the
 * tenant's own `/t/<tenant>/.well-known/<document>`, and is answered as such.
 */
function belowTenantOfWellKnown(path: string): string {
  const inserted = WELL_KNOWN_OF_TENANT.exec(path);
  return inserted ? `${inserted[2]}${inserted[1]}` : path;
}
const WELL_KNOWN_OF_TENANT = /^(\/\.well-known\/[^/]+)(\/t\/[^/]*)$/;

/** The tenant a path names, refused when X-Tenant-Id names another. */
export function sameTenant(id: string, header: string): string {
  if (header !== '' && header !== id) throw badRequest('the path and X-Tenant-Id name different tenants');
  return id;
}
