import { isDeepStrictEqual } from 'node:util';
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import type { PolicyEngine } from '../../../policy/index.js';
import type { Store } from '../../../store/index.js';
import { enforce } from '../../shared/enforce.js';
import { REPEATABLE_PARAMETERS, resourceList } from '../../shared/resources.js';
import { decisionOf, narrowedScopes, rememberDecision } from './decision.js';
import { recognizeScopes, type BuiltInGrant } from '../../internals.js';
import { oidcParams } from '../../shared/oidc-params.js';
import type { GrantHandler } from './handler.js';
import {
  claimScopesOf,
  DEVICE_CODE_GRANT,
  scopesAsked,
  tokenDecisionInput,
  type GrantSource,
  type SourceLookup,
} from './token-input.js';

export interface GateDeps {
  store: Store;
  policy: PolicyEngine;
  tenant: string;
}

/** Parameters every policy-gated grant accepts besides its own: RFC 8707, RFC 9396, and the resource type hints. */
const SHARED_PARAMETERS = ['resource', 'authorization_details', 'resource_types', 'resource_type', 'scope'];

/**
 * A grant whose token request is decided by the `token` decision point, as a pipeline: the
 * grant's required parameters; the code or refresh token it redeems; the decision (a deny stops
 * the request; an allow is remembered for the hooks that shape the issued tokens); the scopes
 * narrowed to what was granted; then oidc-provider's own handler for the grant (PKCE, single
 * use, rotation, DPoP binding, issuance); and the granted authorization details relayed.
 */
export function policyGatedGrant(
  provider: Provider,
  builtIn: BuiltInGrant,
  deps: GateDeps,
  lookup?: SourceLookup,
): GrantHandler {
  return {
    grantType: builtIn.grantType,
    parameters: [...new Set([...builtIn.parameters, ...SHARED_PARAMETERS])],
    // Several `resource`s reach the gate as a list, to be answered invalid_target (assertOneResource), not invalid_request.
    repeatable: REPEATABLE_PARAMETERS,
    handle: policyGated(provider, builtIn.grantType, (ctx) => builtIn.handle(ctx), deps, lookup),
  };
}

const REDEEMED: Record<string, string> = {
  authorization_code: 'authorization code',
  refresh_token: 'refresh token',
};

function policyGated(
  provider: Provider,
  grantType: string,
  handler: (ctx: KoaContextWithOIDC) => Promise<void>,
  deps: GateDeps,
  lookup: SourceLookup | undefined,
) {
  return async (ctx: KoaContextWithOIDC): Promise<void> => {
    assertRequiredParameters(ctx, grantType);
    assertOneResource(ctx, grantType);
    const found = lookup ? await lookup(ctx) : await grantSource(provider, ctx, grantType);
    if (grantType !== 'client_credentials' && !found)
      throw new errors.CustomOIDCProviderError(
        'invalid_grant',
        `the ${REDEEMED[grantType] ?? 'grant'} is unknown or expired`,
      );
    assertOwnSource(ctx, grantType, found);
    const source = found && (await forNamedResource(provider, ctx, found));
    if (source) assertWithinSource(ctx, source);
    const outcome = await deps.policy.decide('token', await tokenDecisionInput(ctx, deps.store, deps.tenant, source));
    rememberDecision(ctx, outcome);
    enforce.oauth(outcome);
    refuseWithheldRefresh(ctx, grantType);
    requireDpopWhenObliged(ctx);
    await narrow(provider, ctx, grantType, source, outcome.input.request.scopes);
    await handler(ctx).catch(asDpopError);
    relayAuthorizationDetails(ctx);
  };
}

/**
 * `extensions.issue_refresh_token: false` withholds refresh tokens, so a refresh it answers is
 * refused before the refresh token is used (nothing rotated or consumed; for another resource it
 * covers, the same refresh token still works). oidc-provider consults the hook only for a first
 * refresh token (shaping.ts): found 2026-11-30, a refresh answered a new one anyway, so a policy
 * that withheld refresh tokens for a resource, or began to, never ended those already issued.
 */
function refuseWithheldRefresh(ctx: KoaContextWithOIDC, grantType: string): void {
  if (grantType === 'refresh_token' && decisionOf(ctx)?.extensions?.issue_refresh_token === false)
    throw new errors.InvalidGrant('the policy issues no refresh token for this client or resource: authorize again');
}

/** RFC 6749 §4.1.3, §6: what each grant cannot do without is invalid_request, before anything is looked up. */
const REQUIRED_PARAMETERS: Record<string, string[]> = {
  authorization_code: ['code', 'redirect_uri'],
  refresh_token: ['refresh_token'],
  [DEVICE_CODE_GRANT]: ['device_code'],
};

function assertRequiredParameters(ctx: KoaContextWithOIDC, grantType: string): void {
  const params = oidcParams(ctx);
  const missing = (REQUIRED_PARAMETERS[grantType] ?? []).find((name) => !params[name]);
  if (missing) throw new errors.InvalidRequest(`missing required parameter '${missing}'`);
}

/**
 * RFC 8707 §2.2: a token is for one resource, so a token request names at most one. Several are
 * invalid_target: for a code or refresh token, each resource it covers is asked for in a request
 * of its own; a client_credentials token is never issued for several at once (an opaque token
 * here has one audience, which introspection reports), whatever the policy would grant.
 */
function assertOneResource(ctx: KoaContextWithOIDC, grantType: string): void {
  if (resourceList(oidcParams(ctx).resource).length <= 1) return;
  throw new errors.InvalidTarget(
    grantType === 'client_credentials'
      ? 'a client_credentials token is for one resource: ask for one token per resource'
      : 'a token is for one resource: name one of the granted resources per token request',
  );
}

/**
 * A code or refresh token covering several resources, as seen by a request for one of them:
 * only the scopes granted for that resource (and the OpenID Connect ones) are held for it, so
 * that the token decision is asked about the named resource alone and a refresh cannot ask one
 * resource for another's scopes. RFC 8707 §2.2 lets a server refuse a request that names none
 * of several (rather than pick one): it is invalid_target, before the code or token is used.
 */
async function forNamedResource(
  provider: Provider,
  ctx: KoaContextWithOIDC,
  source: GrantSource,
): Promise<GrantSource> {
  const carried = resourceList(source.resource);
  if (carried.length <= 1) return source;
  const named = oidcParams(ctx).resource;
  if (typeof named !== 'string')
    throw new errors.InvalidTarget(
      'this authorization covers several resources: name the one the token is for with the resource parameter',
    );
  const grant = source.grantId ? await provider.Grant.find(source.grantId) : undefined;
  const forResource = new Set(
    `${grant?.getResourceScope(named) ?? ''} ${grant?.getOIDCScope() ?? ''}`.split(' ').filter(Boolean),
  );
  const held = (source.scope ?? '').split(' ').filter((scope) => forResource.has(scope));
  return { ...source, scope: held.join(' ') };
}

/**
 * A code or refresh token of another client is refused before anything reads it (RFC 6749 §4.1.3,
 * §6): no decision is asked, no grant narrowed, and the answer is the one an unknown value gets,
 * so that a leaked code cannot be spoiled, nor its resources learnt, by a client it was not issued to.
 */
function assertOwnSource(ctx: KoaContextWithOIDC, grantType: string, source: GrantSource | undefined): void {
  if (!source?.clientId || source.clientId === ctx.oidc.client!.clientId) return;
  throw new errors.CustomOIDCProviderError(
    'invalid_grant',
    `the ${REDEEMED[grantType] ?? 'grant'} is unknown or expired`,
  );
}

/** The code or refresh token being redeemed, looked up without consuming it (the handler validates it, a used one included). */
async function grantSource(
  provider: Provider,
  ctx: KoaContextWithOIDC,
  grantType: string,
): Promise<GrantSource | undefined> {
  const params = oidcParams(ctx);
  if (grantType === 'authorization_code' && params.code)
    return (await provider.AuthorizationCode.find(params.code)) as GrantSource | undefined;
  if (grantType === 'refresh_token' && params.refresh_token)
    return (await provider.RefreshToken.find(params.refresh_token)) as GrantSource | undefined;
  return undefined;
}

/**
 * A code or refresh token is redeemed for at most what it carries (RFC 6749 §6, RFC 8707 §2.2,
 * RFC 9396 §6.1): a refresh asking for scopes it does not hold, a resource it was not issued
 * for, or authorization details that are not among its own are refused here, before the policy
 * is asked (which would otherwise silently narrow them away) and before oidc-provider consumes
 * it (a refused refresh must not cost the client its refresh token).
 */
function assertWithinSource(ctx: KoaContextWithOIDC, source: GrantSource): void {
  const params = oidcParams(ctx);
  if (params.grant_type === 'refresh_token' && params.scope) {
    const held = new Set((source.scope ?? '').split(' ').filter(Boolean));
    const beyond = params.scope.split(' ').filter((scope) => scope && !held.has(scope));
    if (beyond.length)
      throw new errors.InvalidScope('requested scope exceeds the scope originally granted', beyond.join(' '));
  }
  if (params.resource !== undefined) {
    if (!resourceList(source.resource).includes(params.resource))
      throw new errors.InvalidTarget('the resource was not granted to this code or refresh token');
  }
  if (params.authorization_details !== undefined)
    assertDetailsWithin(params.authorization_details, (source.rar ?? []) as unknown[], 'this code or refresh token');
}

/**
 * RFC 9396 §6.2, §7: a token asked for from another (a refresh, an exchange) carries no
 * authorization detail the other does not: each requested one must be one `carried` holds.
 */
export function assertDetailsWithin(requested: string, carried: readonly unknown[], source: string): void {
  if (parsedDetails(requested).every((detail) => carried.some((granted) => isDeepStrictEqual(detail, granted)))) return;
  throw new errors.CustomOIDCProviderError(
    'invalid_authorization_details',
    `authorization_details must be among those granted to ${source}`,
  );
}

function parsedDetails(value: string): unknown[] {
  try {
    const parsed = JSON.parse(value) as unknown;
    if (Array.isArray(parsed)) return parsed;
  } catch {
    // answered below
  }
  throw new errors.CustomOIDCProviderError(
    'invalid_authorization_details',
    'authorization_details must be a JSON array',
  );
}

/** Grants whose code carries the user's grant, its scopes issued as the grant holds them (no scope parameter). */
const CARRIES_ITS_GRANT = new Set(['authorization_code', DEVICE_CODE_GRANT]);

/**
 * What the decision granted, applied: a refresh or client_credentials request's scope parameter
 * narrowed to it; a code's grant narrowed to it (a code carries the grant's scopes, not a scope
 * parameter); and, for a code or refresh token whose authorization named claims, the granted
 * scopes that carry them kept with the token issued, under which alone it releases them
 * (CLAIM_SCOPES, userinfo/accounts.ts), as at /authorize (authorize/grant.ts).
 */
async function narrow(
  provider: Provider,
  ctx: KoaContextWithOIDC,
  grantType: string,
  source: GrantSource | undefined,
  requested: string[],
): Promise<void> {
  const granted = narrowedScopes(requested, decisionOf(ctx)!);
  // The scopes of the request itself: not those only its claims put before the policy (token-input.ts).
  const asked = scopesAsked(oidcParams(ctx), source);
  const claimScopes = claimScopesOf(source);
  if (claimScopes.length) ctx.state.claimScopes = granted.filter((scope) => claimScopes.includes(scope));
  const grantedAsked = granted.filter((scope) => asked.includes(scope) || !claimScopes.includes(scope));
  // oidc-provider reads "no scope" on a refresh as "all the refresh token holds": granting nothing is refusing.
  if (grantType === 'refresh_token' && grantedAsked.length === 0 && asked.length > 0)
    throw new errors.InvalidScope('the policy grants none of the requested scopes', asked.join(' '));
  recognizeScopes(provider, grantedAsked);
  if (!CARRIES_ITS_GRANT.has(grantType)) {
    ctx.oidc.params!.scope = grantedAsked.join(' ') || undefined;
    return;
  }
  // A code (or a device code) carries the grant's scopes, not a scope parameter: narrow the grant itself.
  if (!source?.grantId) return;
  const grant = await provider.Grant.find(source.grantId);
  if (!grant) return;
  const refused = (grant.getOIDCScope() ?? '').split(' ').filter((scope) => scope && !grantedAsked.includes(scope));
  if (refused.length === 0) return;
  grant.rejectOIDCScope(refused.join(' '));
  await grant.save();
}

/** RFC 9449 §5: a replayed or otherwise unusable proof is invalid_dpop_proof (oidc-provider says invalid_grant). */
function asDpopError(error: unknown): never {
  const { error: code, error_detail: detail } = error as { error?: string; error_detail?: string };
  if (code === 'invalid_grant' && typeof detail === 'string' && /DPoP proof/.test(detail)) {
    throw new errors.InvalidDpopProof(detail);
  }
  throw error;
}

/** A policy obligation `dpop_required` refuses the request unless it carries a DPoP proof (RFC 9449). */
function requireDpopWhenObliged(ctx: KoaContextWithOIDC): void {
  if (decisionOf(ctx)?.obligations?.dpop_required === true && !ctx.get('dpop')) {
    throw new errors.InvalidDpopProof('a DPoP proof is required for this client or resource');
  }
}

/** Granted authorization details come from the policy, replacing what the handler echoed. */
function relayAuthorizationDetails(ctx: KoaContextWithOIDC): void {
  const details = decisionOf(ctx)?.authorization_details;
  if (details?.length && typeof ctx.body === 'object' && ctx.body !== null) {
    (ctx.body as Record<string, unknown>).authorization_details = details;
  }
}
