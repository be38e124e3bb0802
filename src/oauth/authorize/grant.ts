import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Decision } from '../../policy/index.js';
import type { ConfigurationSlice } from '../context.js';
import { claims as claimsByScope, claimsOf } from '../claims.js';
import { enforce } from '../shared/enforce.js';
import { narrowedScopes, rememberDecision } from '../token/grants/decision.js';
import { recognizeScopes } from '../internals.js';
import { scopeParameter } from './claims-request.js';
import { authorizeDecisionInput } from './decision-input.js';

const OIDC_SCOPES = new Set(Object.keys(claimsByScope));

type Grant = InstanceType<KoaContextWithOIDC['oidc']['provider']['Grant']>;
type AuthorizationDetail = NonNullable<Grant['rar']>[number];

/**
 * Arbiter has no consent screen: the `authorize` decision point is the consent. Once the user
 * is signed in, every authorization request gets a grant of its own holding exactly what the
 * policy granted: the granted scopes (and, for a targeted resource, its scopes), the granted
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
    const grant = new ctx.oidc.provider.Grant({ accountId, clientId: ctx.oidc.client!.clientId });
    const asked = scopeParameter(ctx.oidc.params?.scope);
    grantExactly(ctx, grant, asked, outcome.input.request.resource ?? null, outcome.decision);
    grantRequestedClaims(ctx, grant, narrowedScopes(outcome.input.request.scopes, outcome.decision));
    await grant.save();
    return grant;
  },
});

function grantExactly(
  ctx: KoaContextWithOIDC,
  grant: Grant,
  requested: string[],
  resource: string | null,
  decision: Decision,
): void {
  const granted = narrowedScopes(requested, decision);
  const refused = requested.filter((scope) => !granted.includes(scope));
  recognizeScopes(ctx.oidc.provider, granted);
  if (granted.length) grant.addOIDCScope(granted.join(' '));
  if (refused.length) grant.rejectOIDCScope(refused.join(' '));
  if (resource) {
    // A targeted resource gets the granted scopes that are not OpenID Connect's; every other
    // requested scope is settled as not the resource's, so that no consent is asked for it.
    const forResource = granted.filter((scope) => !OIDC_SCOPES.has(scope));
    const notForResource = requested.filter((scope) => !forResource.includes(scope));
    if (forResource.length) grant.addResourceScope(resource, forResource.join(' '));
    if (notForResource.length) grant.rejectResourceScope(resource, notForResource.join(' '));
  }
  for (const detail of decision.authorization_details ?? []) grant.addRar(detail as AuthorizationDetail);
}

/**
 * Claims about the authentication rather than the person, which oidc-provider releases when asked
 * for without a grant (its consent prompt skips them too): rejecting one would drop it.
 */
const AUTHENTICATION_CLAIMS = new Set(['sub', 'sid', 'auth_time', 'acr', 'amr', 'iss']);

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
