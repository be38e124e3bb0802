import type { Context, Next } from 'koa';
import { isTenantId, TENANT_HEADER } from '../tenancy/index.js';

const TENANT_PATH = /^\/([^/]+)(\/access\/v1\/.*)$/;

/**
 * AuthZEN 1.0 §9.2: a PDP serving several tenants is identified per tenant by a path
 * (https://as.example/<tenant>), so its endpoints are https://as.example/<tenant>/access/v1/…
 * That form is the same request as /access/v1/… with X-Tenant-Id: <tenant>; a request naming two
 * different tenants is refused (answered here: this runs before the JSON error handler). Mounted
 * before the audit trail, so entries show the API path.
 */
export async function authzenTenantPaths(ctx: Context, next: Next): Promise<void> {
  const match = TENANT_PATH.exec(ctx.path);
  if (match && isTenantId(match[1])) {
    const header = ctx.get(TENANT_HEADER);
    if (header && header !== match[1]) {
      ctx.status = 400;
      ctx.body = { error: 'invalid_request', error_description: 'the path and X-Tenant-Id name different tenants' };
      return;
    }
    ctx.request.headers[TENANT_HEADER] = match[1];
    ctx.path = match[2];
  }
  await next();
}
