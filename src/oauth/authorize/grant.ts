import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import type { Decision, RequestInput } from '../../policy/index.js';
import type { ConfigurationSlice } from '../context.js';
import { AUTHENTICATION_CLAIMS, claims as claimsByScope, claimsOf } from '../claims.js';
import { enforce } from '../shared/enforce.js';
import { oidcParams } from '../shared/oidc-params.js';
import { narrowedScopes, rememberDecision } from '../token/grants/decision.js';
import { scopeParameter } from './claims-request.js';
import { authorizeDecisionInput } from './decision-input.js';

const OIDC_SCOPES = new Set(Object.keys(claimsByScope));

type Grant = InstanceType<KoaContextWithOIDC['oidc']['provider']['Grant']>;
type AuthorizationDetail = NonNullable<Grant['rar']>[number];

/**
 * Arbiter has no consent screen: the `authorize` decision point is the consent. Once the user
 * is signed in, every authorization request gets a grant of its own holding exactly what the
 * policy granted: the granted scopes (and, for each targeted resource, its scopes), the granted
 * authorization details; everything else asked for is recorded as rejected, so that
 * oidc-provider neither asks for consent nor issues it. A grant is never shared with an earlier
 * authorization of the same browser session: tokens issued before keep what they were issued.
 */
export const policyConsent: ConfigurationSlice = ({ store, policy, tenant }) => ({
  async loadExistingGrant(ctx) {
    const accountId = ctx.oidc.session?.accountId;
    if (!accountId) return undefined;
    const outcome = await policy.decide('authorize', await authorizeDecisionInput(ctx, store, tenant, accountId));
    rememberDecision(ctx, outcome);
    enforce.oauth(outcome);
    const perResource = scopesPerResource(outcome.input.request, outcome.decision);
    const grant = new ctx.oidc.provider.Grant({ accountId, clientId: ctx.oidc.client!.clientId });
    const asked = scopeParameter(oidcParams(ctx).scope);
    grantExactly(ctx, grant, asked, perResource, outcome.decision);
    grantRequestedClaims(ctx, grant, narrowedScopes(outcome.input.request.scopes, outcome.decision));
    await grant.save();
    return grant;
  },
});

/**
 * The scopes each requested resource gets (RFC 8707): the non-OpenID scopes the decision granted
 * for it, in its `resources` entry. A decision about one resource may leave `resources` out, its
 * `scopes` being that resource's (as before several could be requested). With several, a
 * resource the decision has no entry for was not granted, and the request is refused with
 * invalid_target (RFC 8707 §2) rather than answered with a code for fewer resources than asked.
 */
function scopesPerResource(request: RequestInput, decision: Decision): Map<string, string[]> {
  const requested = (request.resources ?? []).map((indicator) => indicator.resource);
  const granted = narrowedScopes(request.scopes, decision).filter((scope) => !OIDC_SCOPES.has(scope));
  const perResource = new Map<string, string[]>();
  for (const resource of requested) {
    const entry = decision.resources?.find((candidate) => candidate.resource === resource);
    if (entry)
      perResource.set(
        resource,
        granted.filter((scope) => entry.scopes.includes(scope)),
      );
    else if (requested.length === 1) perResource.set(resource, granted);
  }
  const refused = requested.filter((resource) => !perResource.has(resource));
  if (refused.length)
    throw new errors.InvalidTarget(`the policy did not grant the requested resource: ${refused.join(' ')}`);
  return perResource;
}

function grantExactly(
  ctx: KoaContextWithOIDC,
  grant: Grant,
  requested: string[],
  perResource: Map<string, string[]>,
  decision: Decision,
): void {
  const granted = narrowedScopes(requested, decision);
  // With several resources every token is for one of them (a token request must name it), so
  // the grant's own part keeps the OpenID Connect scopes only: each resource's scopes are its own.
  const forOpenId = perResource.size > 1 ? granted.filter((scope) => OIDC_SCOPES.has(scope)) : granted;
  const notForOpenId = requested.filter((scope) => !forOpenId.includes(scope));
  if (forOpenId.length) grant.addOIDCScope(forOpenId.join(' '));
  if (notForOpenId.length) grant.rejectOIDCScope(notForOpenId.join(' '));
  // Every requested scope is settled for each resource, as granted or as not the resource's, so that no consent is asked for it.
  for (const [resource, forResource] of perResource) {
    const notForResource = requested.filter((scope) => !forResource.includes(scope));
    if (forResource.length) grant.addResourceScope(resource, forResource.join(' '));
    if (notForResource.length) grant.rejectResourceScope(resource, notForResource.join(' '));
  }
  for (const detail of decision.authorization_details ?? []) grant.addRar(detail as AuthorizationDetail);
}

/**
 * The claims the `claims` parameter names (OIDC Core §5.5; those oidc-provider knows): granted
 * when a scope the policy granted carries them (claims-request.ts), rejected otherwise, so that
 * oidc-provider neither asks for consent nor releases them. Where they go (ID token, UserInfo) is
 * what the parameter asked.
 */
function grantRequestedClaims(ctx: KoaContextWithOIDC, grant: Grant, grantedScopes: string[]): void {
  const releasable = claimsOf(grantedScopes);
  const named = [...ctx.oidc.requestParamClaims].filter((claim) => !AUTHENTICATION_CLAIMS.has(claim));
  const granted = named.filter((claim) => releasable.has(claim));
  const refused = named.filter((claim) => !releasable.has(claim));
  if (granted.length) grant.addOIDCClaims(granted);
  if (refused.length) grant.rejectOIDCClaims(refused);
}
