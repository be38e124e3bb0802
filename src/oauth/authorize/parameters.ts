import { errors } from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { RequestState } from '../../http/state.js';
import { assertRegisteredAuthMethod } from '../clients/auth-method.js';
import type { ConfigurationSlice } from '../context.js';

/** oidc-provider's name of the /par route (RFC 9126). */
const PAR_ROUTE = 'pushed_authorization_request';

const TYPE_URI_LIST = /^[^,\s]+(,[^,\s]+)*$/;

/**
 * The spec's /authorize rules beyond what oidc-provider checks itself, at /authorize and at /par
 * alike. oidc-provider runs extraParams validators after the client and redirect_uri are verified
 * (at /par: the client authenticated), so a violation here is redirected to the client with
 * error, error_description and state (at /par: a 400 with the error).
 */
export const authorizationParameters: ConfigurationSlice = () => ({
  extraParams: {
    resource_types: checkAuthorizationRequest,
    resource_type: null,
  },
});

async function checkAuthorizationRequest(ctx: KoaContextWithOIDC, resourceTypes: string | undefined): Promise<void> {
  if (ctx.oidc.route === PAR_ROUTE) assertRegisteredAuthMethod(ctx);
  // A pushed request was checked when it was pushed (RFC 9126 §2.1: as an authorization request is).
  if (ctx.oidc.route !== 'authorization' && ctx.oidc.route !== PAR_ROUTE) return;
  if (ctx.oidc.route === 'authorization' && ctx.oidc.entities.PushedAuthorizationRequest) return;
  // As the client sent them: oidc-provider has meanwhile given a RAR request its default resource.
  const params = authorizationRequestParameters(ctx);
  if (params.authorization_details !== undefined && (params.resource !== undefined || params.scope !== undefined)) {
    throw new errors.InvalidRequest('authorization_details cannot be combined with resource or scope');
  }
  if (resourceTypes !== undefined && !TYPE_URI_LIST.test(resourceTypes)) {
    throw new errors.InvalidRequest('resource_types must be a comma-separated list of type URIs');
  }
}

/**
 * The authorization request's parameters exactly as sent: those of its request object or pushed
 * request when it carries one (request-object.ts), else the query, or the form of a POST (/par,
 * POST /authorize; see shared/form-body.ts).
 */
export function authorizationRequestParameters(ctx: {
  method: string;
  query: Record<string, unknown>;
  state: RequestState & { requestObject?: Record<string, unknown> | null };
}): Record<string, unknown> {
  return ctx.state.requestObject ?? (ctx.method === 'POST' ? ctx.state.body : ctx.query) ?? {};
}
