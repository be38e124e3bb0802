import type { ConfigurationSlice } from '../context.js';
import { claims as claimsByScope } from '../claims.js';
import { denial, narrowedScopes, rememberDecision } from '../grants/decision.js';
import { recognizeScopes } from '../scopes.js';
import { authorizeDecisionInput } from './decision-input.js';

const OIDC_SCOPES = new Set(Object.keys(claimsByScope));

/**
 * Arbiter has no consent screen: the `authorize` decision point is the consent. Once the
 * user is signed in, the policy decides which of the requested scopes the grant holds;
 * the others are recorded as rejected so that oidc-provider asks for no consent.
 */
export const policyConsent: ConfigurationSlice = ({ store, policy, tenant }) => ({
  async loadExistingGrant(ctx) {
    const accountId = ctx.oidc.session?.accountId;
    if (!accountId) return undefined;
    const outcome = await policy.decide('authorize', await authorizeDecisionInput(ctx, store, tenant, accountId));
    rememberDecision(ctx, outcome);
    if (!outcome.decision.allow) throw denial(outcome);

    const clientId = ctx.oidc.client!.clientId;
    const existingId = ctx.oidc.result?.consent?.grantId ?? ctx.oidc.session?.grantIdFor(clientId);
    const grant = (existingId && (await ctx.oidc.provider.Grant.find(existingId))) || new ctx.oidc.provider.Grant({ accountId, clientId });
    const requested = outcome.input.request.scopes;
    const granted = narrowedScopes(requested, outcome.decision);
    const refused = requested.filter((scope) => !granted.includes(scope));
    const resource = outcome.input.request.resource;
    recognizeScopes(ctx.oidc.provider, granted);
    // A targeted resource also gets the non-OIDC scopes.
    if (granted.length) grant.addOIDCScope(granted.join(' '));
    if (refused.length) grant.rejectOIDCScope(refused.join(' '));
    const forResource = granted.filter((scope) => !OIDC_SCOPES.has(scope));
    if (resource && forResource.length) grant.addResourceScope(resource, forResource.join(' '));
    await grant.save();
    return grant;
  },
});
