import { errors } from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { RequestState } from '../../http/state.js';
import type { ConfigurationSlice } from '../context.js';
import { MAX_RESOURCE_INDICATORS, resourceList } from '../shared/resources.js';

const TYPE_URI_LIST = /^[^,\s]+(,[^,\s]+)*$/;

/**
 * The spec's /authorize rules beyond what oidc-provider checks itself. oidc-provider runs
 * extraParams validators after the client and redirect_uri are verified, so a violation
 * here is redirected to the client with error, error_description and state.
 */
export const authorizationParameters: ConfigurationSlice = () => ({
  extraParams: {
    resource_types: checkAuthorizationRequest,
    resource_type: null,
  },
});

async function checkAuthorizationRequest(ctx: KoaContextWithOIDC, resourceTypes: string | undefined): Promise<void> {
  if (ctx.oidc.route !== 'authorization') return;
  // As the client sent them: oidc-provider has meanwhile given a RAR request its default resource.
  const params = authorizationRequestParameters(ctx);
  if (params.authorization_details !== undefined && (params.resource !== undefined || params.scope !== undefined)) {
    throw new errors.InvalidRequest('authorization_details cannot be combined with resource or scope');
  }
  if (resourceTypes !== undefined && !TYPE_URI_LIST.test(resourceTypes)) {
    throw new errors.InvalidRequest('resource_types must be a comma-separated list of type URIs');
  }
  // As oidc-provider assembled them, so that a pushed request or a request object is checked too.
  checkResourceList(resourceList(ctx.oidc.params?.resource));
}

/**
 * RFC 8707 §2 lets `resource` repeat (oidc-provider has already refused a relative URI or one
 * with a fragment as invalid_target). The same resource twice is a malformed request, and more
 * than MAX_RESOURCE_INDICATORS are more than the server takes in one authorization.
 */
function checkResourceList(resources: string[]): void {
  if (resources.length > MAX_RESOURCE_INDICATORS)
    throw new errors.InvalidTarget(`at most ${MAX_RESOURCE_INDICATORS} resource indicators may be requested at once`);
  if (new Set(resources).size !== resources.length)
    throw new errors.InvalidRequest('the same resource indicator was given more than once');
}

/** The authorization request's parameters exactly as sent (query, or the form of a POST; see shared/form-body.ts). */
export function authorizationRequestParameters(ctx: {
  method: string;
  query: Record<string, unknown>;
  state: RequestState;
}): Record<string, unknown> {
  return (ctx.method === 'POST' ? ctx.state.body : ctx.query) ?? {};
}
