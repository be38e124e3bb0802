import type { ArbiterContext } from '../state.js';

/**
 * Clients are per tenant, so a tenant's client that calls without X-Tenant-Id is unknown where it
 * asked. RFC 6749 §5.2's invalid_client says only that authentication failed; to a request that
 * named no tenant Arbiter adds that clients of other tenants need the header. The hint is the same
 * whatever the client_id (an unknown client, a wrong secret, another tenant's client), so it tells
 * an unauthenticated caller nothing about which clients exist where.
 */
export const OTHER_TENANT_HINT =
  'a client of another tenant than the default one needs the X-Tenant-Id header naming its tenant, or its path /t/<tenant>/…';

/** `description`, with the hint when the request named no tenant (by X-Tenant-Id or by path: the root resolved it). */
export function withTenantHint(ctx: Pick<ArbiterContext, 'state'>, description: string): string {
  return ctx.state.tenant.id !== null ? description : `${description} (${OTHER_TENANT_HINT})`;
}

/** The invalid_client answers oidc-provider gives (at /token, /introspect, …), with the hint (protocolRequest, after it answered). */
export function addTenantHint(ctx: ArbiterContext): void {
  const body = ctx.body as { error?: unknown; error_description?: unknown } | undefined;
  if (body && typeof body === 'object' && body.error === 'invalid_client' && typeof body.error_description === 'string')
    body.error_description = withTenantHint(ctx, body.error_description);
}
