import { errors } from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { RequestState } from '../../http/state.js';
import type { OAuthState } from '../state.js';
import type { PolicyEngine } from '../../policy/index.js';
import { assertRegisteredAuthMethod } from '../clients/auth-method.js';
import type { ConfigurationSlice } from '../context.js';
import { MAX_RESOURCE_INDICATORS, resourceList } from '../shared/resources.js';
import { oidcParams } from '../shared/oidc-params.js';

/** oidc-provider's name of the /par route (RFC 9126). */
const PAR_ROUTE = 'pushed_authorization_request';

const TYPE_URI_LIST = /^[^,\s]+(,[^,\s]+)*$/;

/** The scopes that may come with authorization_details when policy data names none (OIDC clients sign in with RAR). */
const DEFAULT_RAR_COMBINABLE_SCOPES = ['openid'];

/**
 * The spec's /authorize rules beyond what oidc-provider checks itself, at /authorize and at /par
 * alike. oidc-provider runs extraParams validators after the client and redirect_uri are verified
 * (at /par: the client authenticated), so a violation here is redirected to the client with
 * error, error_description and state (at /par: a 400 with the error).
 */
export const authorizationParameters: ConfigurationSlice = ({ policy }) => ({
  extraParams: {
    resource_types: (ctx: KoaContextWithOIDC, resourceTypes: string | undefined) =>
      checkAuthorizationRequest(ctx, resourceTypes, policy),
    resource_type: null,
  },
});

async function checkAuthorizationRequest(
  ctx: KoaContextWithOIDC,
  resourceTypes: string | undefined,
  policy: PolicyEngine,
): Promise<void> {
  if (ctx.oidc.route === PAR_ROUTE) assertRegisteredAuthMethod(ctx);
  // FAPI 2.0 Security Profile §5.3.2.2: PKCE with S256 only.
  const state: OAuthState = ctx.state;
  if (ctx.oidc.isFapi('2.0') && state.pkcePlain)
    throw new errors.InvalidRequest('the FAPI 2.0 Security Profile allows PKCE with S256 only');
  // A pushed request was checked when it was pushed (RFC 9126 §2.1: as an authorization request is).
  if (ctx.oidc.route !== 'authorization' && ctx.oidc.route !== PAR_ROUTE) return;
  if (ctx.oidc.route === 'authorization' && ctx.oidc.entities.PushedAuthorizationRequest) return;
  // As the client sent them: oidc-provider has meanwhile given a RAR request its default resource.
  const params = authorizationRequestParameters(ctx);
  if (params.authorization_details !== undefined) await assertDetailsAlone(params, policy);
  if (resourceTypes !== undefined && !TYPE_URI_LIST.test(resourceTypes)) {
    throw new errors.InvalidRequest('resource_types must be a comma-separated list of type URIs');
  }
  // As oidc-provider assembled them, so that a pushed request or a request object is checked too.
  checkResourceList(resourceList(oidcParams(ctx).resource));
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

/**
 * The spec makes authorization_details exclusive with resource and scope (invalid_request), a
 * deliberate difference from RFC 9396 §3.1, which lets them combine: the policy decides on
 * the details or on scopes for a resource, never on a mix it cannot tell apart. The exception
 * is the scopes policy data marks as combinable (`oauth.rar_combinable_scopes`, default
 * `["openid"]`): they ask for something else than access to a resource (`openid`: an ID token).
 */
async function assertDetailsAlone(params: Record<string, unknown>, policy: PolicyEngine): Promise<void> {
  if (params.resource !== undefined)
    throw new errors.InvalidRequest('authorization_details cannot be combined with resource');
  if (params.scope === undefined) return;
  if (typeof params.scope !== 'string') throw new errors.InvalidRequest("'scope' must be given once");
  const combinable = await combinableScopes(policy);
  const others = params.scope.split(' ').filter((scope) => scope && !combinable.has(scope));
  if (others.length)
    throw new errors.InvalidRequest(
      `authorization_details cannot be combined with scope ${others.join(' ').slice(0, 200)} ` +
        `(only ${[...combinable].join(' ') || 'no scope'} may come with authorization_details)`,
    );
}

/** Policy data's `oauth.rar_combinable_scopes`, else `openid`. */
async function combinableScopes(policy: PolicyEngine): Promise<Set<string>> {
  const named = await policy.policyData('oauth.rar_combinable_scopes');
  const scopes: unknown[] = Array.isArray(named) ? named : DEFAULT_RAR_COMBINABLE_SCOPES;
  return new Set(scopes.filter((scope): scope is string => typeof scope === 'string'));
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
