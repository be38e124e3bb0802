import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import { INTROSPECTION_SIGNING_ALGS } from '../../catalog/index.js';
import { HttpError } from '../../http/errors.js';
import { requestIssuer, type Tenant } from '../../tenancy/index.js';
import { assertRegisteredAuthMethod } from '../clients/auth-method.js';
import type { ConfigurationSlice } from '../context.js';
import { authenticateClient, ownRouteContext, signedIntrospection, type OwnRouteContext } from '../internals.js';
import { routes } from '../routes.js';
import { tokenCallers, type TokenCallers, type TokenRequirement } from '../shared/callers.js';
import type { MtlsSettings } from '../mtls/index.js';
import { guardClientCredentials, requireClientCredential } from '../shared/credential-guard.js';
import { httpRefusal } from '../shared/enforce.js';
import { formBody, formParameter } from '../shared/form-body.js';
import { takeArtefact } from '../../../adapters/oidc/index.js';
import { isClientLive } from '../shared/owned-artefacts.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';
import { decideIntrospection, parseContext, type Caller, type IntrospectionDeps } from './decide.js';
import { answersWithJwt, INTROSPECTION_JWT_TYPE } from './jwt.js';
import { INACTIVE, introspectionBody, isSingleUse } from './response.js';
import { findIntrospectedToken } from './token.js';

/**
 * A Bearer caller: a valid access token of this tenant with one of these scopes, issued for
 * introspection's resource indicator (as UMA's protection tokens are), this server or none; any
 * other is 401 invalid_token.
 */
const BEARER_CALLER: TokenRequirement = {
  scope: ['introspection', 'uma_protection'],
  audience: 'urn:as:introspect',
  lackingScope: 'invalid_token',
};

/** oidc-provider's name of the route: client assertions may name its URL as their audience. */
const ROUTE_NAME = 'introspection';

/** The endpoint's own parameters (RFC 7662 §2.1, and Arbiter's `context`), besides client authentication's. */
const PARAMETERS = ['token', 'token_type_hint', 'context'] as const;

export const INTROSPECT_PATH = routes.introspection;

export type IntrospectEndpointDeps = IntrospectionDeps & {
  providerFor(tenant: Tenant): Provider;
  maxBodyBytes: number;
  /** Where client certificates come from, for a Bearer caller's certificate-bound token (RFC 8705 §3). */
  mtls: MtlsSettings;
};

/**
 * /introspect, answered by Arbiter alone (oidc-provider's own introspection action never runs), as
 * Fosite's introspection handler chain does: the form read with the size limit, a request without
 * any credential refused with 401 invalid_client (a client_id alone is none: RFC 7662 §2.1 wants
 * the caller authorized, so public clients cannot introspect), a client that failed too often
 * refused before its credentials are verified, then `introspect`: the caller authenticated, the
 * token found, the `introspect` decision asked on every call, and what it granted relayed.
 */
export function introspectMiddleware(deps: IntrospectEndpointDeps): ArbiterMiddleware[] {
  return [
    formBody(deps.maxBodyBytes),
    requireClientCredential({ issuer: deps.issuer, publicClients: false, bearer: true, mtls: deps.mtls }),
    guardClientCredentials,
    introspectionEndpoint(deps),
  ];
}

/**
 * POST /introspect. The caller is a client authenticated by oidc-provider's own client
 * authentication (Basic, post, private_key_jwt), or a resource server presenting an access token
 * of its own (Bearer). Other methods go on to oidc-provider (its CORS preflight, its 404).
 */
function introspectionEndpoint(deps: IntrospectEndpointDeps) {
  const callers = tokenCallers(deps.providerFor, deps.mtls, deps.issuer);
  return async function introspect(ctx: ArbiterContext, next: Next): Promise<void> {
    if (ctx.method !== 'POST') return next();
    assertContextParameter(ctx);
    assertFormBody(ctx);
    const provider = deps.providerFor(ctx.state.tenant);
    const oidc = ownRouteContext(provider, ctx as never, ROUTE_NAME);
    try {
      const caller = await authenticateCaller(ctx, oidc, callers);
      const answer = await introspection(ctx, deps, provider, caller, oidc);
      await respond(ctx, provider, oidc, caller, answer);
    } catch (error) {
      if (!answeredLibraryError(ctx, error)) throw error;
    }
  };
}

/** Who asks: a resource server by its access token (Bearer, or DPoP when bound), or a client by its own credentials. */
async function authenticateCaller(ctx: ArbiterContext, oidc: OwnRouteContext, callers: TokenCallers): Promise<Caller> {
  if (/^(bearer|dpop) /i.test(ctx.get('authorization'))) {
    const { clientId, scopes } = await callers(ctx, BEARER_CALLER);
    return { clientId, method: 'bearer', scopes };
  }
  const client = await authenticateClient(oidc, ctx.state.body ?? {}, PARAMETERS);
  assertRegisteredAuthMethod(oidc);
  return { clientId: client.clientId, method: client.clientAuthMethod ?? 'unknown', scopes: [] };
}

/**
 * The answer for an authenticated caller: inactive unless the token is found, valid, of a live
 * client, and the `introspect` decision allows it; then the token's facts the decision grants.
 * A token the decision marks single-use is deleted once answered.
 */
async function introspection(
  ctx: ArbiterContext,
  deps: IntrospectEndpointDeps,
  provider: Provider,
  caller: Caller,
  oidc: OwnRouteContext,
): Promise<Record<string, unknown>> {
  const value = formParameter(ctx, 'token');
  if (!value) throw new HttpError(400, 'invalid_request', "missing required parameter 'token'");
  const tenant = ctx.state.tenant.name;
  const token = await findIntrospectedToken(provider, value, formParameter(ctx, 'token_type_hint'));
  // A token of a disabled or deleted client is inactive (RFC 7662 §2.2), whatever the policy says.
  if (!token?.clientId || !(await isClientLive(deps.store, tenant, token.clientId, token.kind))) return { ...INACTIVE };
  oidc.oidc.entity(token.kind, token);
  const outcome = await decideIntrospection(ctx, deps, tenant, token, caller);
  // An engine that could not decide is a 503, as at every other point: `active: false` would tell
  // the resource server the token is dead (revoked, expired) when nobody decided anything.
  if (outcome.engineError) throw httpRefusal(outcome)!;
  if (!outcome.decision.allow) return { ...INACTIVE };
  const issuer = requestIssuer(deps.issuer, ctx.state.tenant);
  const body = await introspectionBody(
    deps.store,
    tenant,
    issuer,
    token,
    outcome.decision,
    outcome.input.request.resource_types,
  );
  // Single use: of the requests that got this far at once (on any node), only the one that took it is answered active.
  if (isSingleUse(token, outcome.decision) && !(await takeArtefact(deps.store, tenant, token.kind, token.jti)))
    return { ...INACTIVE };
  return body;
}

/** JSON (RFC 7662 §2.2), or a signed JWT when the caller asks for one (RFC 9701 §4). */
async function respond(
  ctx: ArbiterContext,
  provider: Provider,
  oidc: OwnRouteContext,
  caller: Caller,
  answer: Record<string, unknown>,
): Promise<void> {
  ctx.status = 200;
  if (!answersWithJwt(ctx)) {
    ctx.body = answer;
    return;
  }
  const signed = await signedIntrospection(provider, oidc, caller.clientId, answer);
  if (!signed) throw new HttpError(401, 'invalid_client', 'the caller is no longer a client of this tenant');
  ctx.body = signed;
  ctx.type = `${INTROSPECTION_JWT_TYPE}; charset=utf-8`;
}

/**
 * oidc-provider's errors from its client authentication (invalid_client, invalid_request), answered
 * as its own error handler answers them; false for any other error, left to the route's `errors` step.
 */
function answeredLibraryError(ctx: ArbiterContext, error: unknown): boolean {
  const fields = error as { expose?: unknown; statusCode?: unknown; message?: unknown; error_description?: unknown };
  if (!(error instanceof Error) || fields.expose !== true || typeof fields.statusCode !== 'number') return false;
  ctx.status = fields.statusCode;
  ctx.body = {
    error: error.message,
    ...(typeof fields.error_description === 'string' ? { error_description: fields.error_description } : {}),
  };
  return true;
}

/** oidc-provider takes urlencoded bodies only at its endpoints (RFC 7662 §2.1): so does this one. */
function assertFormBody(ctx: ArbiterContext): void {
  if (ctx.get('content-type') && !ctx.is('application/x-www-form-urlencoded'))
    throw new HttpError(
      400,
      'invalid_request',
      `only application/x-www-form-urlencoded content-type bodies are supported on POST ${ctx.path}`,
    );
}

function assertContextParameter(ctx: ArbiterContext): void {
  try {
    const context = parseContext(ctx);
    if (typeof context !== 'object' || context === null || Array.isArray(context)) throw new Error('not an object');
  } catch {
    throw new HttpError(400, 'invalid_request', 'context must be a JSON object');
  }
}

/**
 * oidc-provider's introspection stays configured but never answers: the route table sends every
 * POST /introspect to `introspectionEndpoint`. Enabled, it names the endpoint in discovery and
 * gives client assertions the endpoint's URL as an audience; its hook refuses everything, so that
 * nothing could ever be introspected twice or past the policy. `jwtIntrospection` makes clients'
 * `introspection_signed_response_alg` known and advertises the algorithms (RFC 9701 §6, §7).
 */
export const introspectionConfiguration: ConfigurationSlice = () => ({
  features: {
    introspection: { enabled: true, allowedPolicy: () => false },
    jwtIntrospection: { enabled: true },
  },
  enabledJWA: { introspectionSigningAlgValues: [...INTROSPECTION_SIGNING_ALGS] },
});
