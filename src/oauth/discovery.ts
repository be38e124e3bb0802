import type { Context, Next } from 'koa';
import { claimsSupported, scopes } from './claims.js';
import { extraEndpoints } from './routes.js';

const DISCOVERY_PATH = '/.well-known/openid-configuration';

/**
 * Completes oidc-provider's discovery document with what only Arbiter knows: its own
 * routers' endpoints and the RAR types that policy data defines at run time.
 */
export function discoveryExtras(issuer: string, authorizationDetailsTypes: () => Promise<string[]>) {
  return async (ctx: Context, next: Next): Promise<void> => {
    await next();
    if (ctx.path !== DISCOVERY_PATH || ctx.status !== 200 || typeof ctx.body !== 'object' || ctx.body === null) return;
    const document = ctx.body as Record<string, unknown>;
    anchorEndpointsAtIssuer(document, issuer);
    for (const [field, path] of Object.entries(extraEndpoints)) document[field] = `${issuer}${path}`;
    document.authorization_details_types_supported = await authorizationDetailsTypes();
    document.client_id_metadata_document_supported = true;
    document.subject_types_supported = ['public'];
    document.scopes_supported = scopes;
    document.claims_supported = claimsSupported;
  };
}

/**
 * oidc-provider derives endpoint URLs from the request's Host; Arbiter's endpoints are
 * always the issuer's, whatever name a client used to reach this node.
 */
function anchorEndpointsAtIssuer(document: Record<string, unknown>, issuer: string): void {
  for (const [field, value] of Object.entries(document)) {
    if ((field.endsWith('_endpoint') || field === 'jwks_uri') && typeof value === 'string') {
      document[field] = `${issuer}${new URL(value).pathname}`;
    }
  }
}
