import { isTenantId, sameTenant, type TenantPath } from '../tenancy/index.js';

const TENANT_PATH = /^\/([^/]+)(\/access\/v1\/.*)$/;

/**
 * AuthZEN 1.0 §9.2: a PDP serving several tenants is identified per tenant by a path
 * (https://as.example/<tenant>), so its endpoints are https://as.example/<tenant>/access/v1/…
 * That form is the same request as /access/v1/… with X-Tenant-Id: <tenant>; a request naming two
 * different tenants is refused (a 400, thrown). The root (src/routes.ts) resolves it once, before
 * the route runs, so that metrics and audit entries show the API path.
 */
export function authzenTenantPathOf(path: string, header: string): TenantPath | null {
  const [, tenant, rest] = TENANT_PATH.exec(path) ?? [];
  if (tenant === undefined || rest === undefined || !isTenantId(tenant)) return null;
  return { id: sameTenant(tenant, header), rest };
}
