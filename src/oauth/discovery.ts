import type { Next } from 'koa';
import type { ArbiterContext } from './state.js';
import { claimsSupported, scopes } from './claims.js';
import { advertisedFeatures, DISCOVERY_PATH } from './routes.js';
import { requestIssuer } from '../tenancy/index.js';
import { mtlsEndpointAliases } from './mtls/index.js';

/**
 * Completes oidc-provider's discovery document with what only Arbiter knows: the fields of
 * its enabled features (routes.ts, `advertisedFeatures`: nothing that does not answer is
 * advertised) and the RAR types that policy data defines at run time, read on every request
 * (oidc-provider's own list is synced only at /authorize and /token). grant_types_supported
 * is oidc-provider's own list of the grants registered with it.
 *
 * One document, three paths (edge.ts runs this at each): OpenID Connect Discovery's
 * /.well-known/openid-configuration, RFC 8414's /.well-known/oauth-authorization-server (which
 * oidc-provider answers with the same action, and which MCP clients read first), and
 * /.well-known/uma2-configuration: UMA 2.0's metadata is RFC 8414 metadata plus the UMA
 * endpoints and uma_profiles_supported. They are equal field for field and cannot drift apart.
 */
export function discoveryExtras(
  issuer: string,
  authorizationDetailsTypes: () => Promise<readonly string[]>,
  mtlsEndpointBaseUrl: string | null = null,
) {
  return async (ctx: ArbiterContext, next: Next): Promise<void> => {
    await next();
    if (ctx.status !== 200 || typeof ctx.body !== 'object' || ctx.body === null) return;
    const document = ctx.body as Record<string, unknown>;
    // The tenant's own issuer at /t/<tenant> (oidc-provider's `issuer` is already that one).
    const base = requestIssuer(issuer, ctx.state.tenant);
    anchorEndpointsAtIssuer(document, base, ctx.state.tenant.path);
    for (const feature of Object.values(advertisedFeatures)) {
      if (!feature.enabled) continue;
      for (const [field, path] of Object.entries(feature.endpoints ?? {})) document[field] = `${base}${path}`;
      Object.assign(document, feature.metadata, feature.fromDocument?.(document));
    }
    if (mtlsEndpointBaseUrl)
      document.mtls_endpoint_aliases = mtlsEndpointAliases(document, issuer, mtlsEndpointBaseUrl);
    document.authorization_details_types_supported = await authorizationDetailsTypes();
    document.subject_types_supported = ['public'];
    document.scopes_supported = scopes;
    document.claims_supported = claimsSupported;
  };
}

/** /.well-known/uma2-configuration is answered as the discovery document (see above). */
export async function umaConfigurationAsDiscovery(ctx: ArbiterContext, next: Next): Promise<void> {
  const asked = ctx.path;
  ctx.path = DISCOVERY_PATH;
  try {
    await next();
  } finally {
    ctx.path = asked;
  }
}

/**
 * oidc-provider derives endpoint URLs from the request's Host; Arbiter's endpoints are
 * always the issuer's, whatever name a client used to reach this node.
 */
function anchorEndpointsAtIssuer(document: Record<string, unknown>, issuer: string, tenantPath = ''): void {
  for (const [field, value] of Object.entries(document)) {
    if ((field.endsWith('_endpoint') || field === 'jwks_uri') && typeof value === 'string') {
      // oidc-provider's URLs already carry the tenant's path (ctx.mountPath), which `issuer` ends with.
      const path = new URL(value).pathname;
      document[field] =
        `${issuer}${tenantPath && path.startsWith(`${tenantPath}/`) ? path.slice(tenantPath.length) : path}`;
    }
  }
}
