import { assertClientAssertionClaims, CLIENT_AUTH_METHODS } from '../clients/auth-method.js';
import { providerIssuer, type ConfigurationSlice } from '../context.js';
import { decisionOf } from './grants/decision.js';
import { defaultResourceForDetails } from '../shared/rar.js';
import { oidcParams } from '../shared/oidc-params.js';
import { CLAIM_SCOPES, DELEGATION_IDS, EXCHANGED_FROM, SUBJECT_ISSUER } from '../state.js';
import { accessTokenFormatOf, resourceServerFormat } from './jwt-access-tokens.js';

/** Client authentication methods of the spec (CLIENT_AUTH_METHODS), and the bounds of a client assertion's times. */
export const clientAuthentication: ConfigurationSlice = () => ({
  clientAuthMethods: [...CLIENT_AUTH_METHODS],
  assertJwtClientAuthClaimsAndHeader: assertClientAssertionClaims,
});

/**
 * Refresh tokens: the authorization_code grant issues one by default (no offline_access
 * needed) unless the policy withholds it with `extensions.issue_refresh_token: false`;
 * public clients rotate on every use.
 */
export const refreshTokens: ConfigurationSlice = () => ({
  // A token lives its own lifetime: a later sign-in in the same browser (which gets a grant of its
  // own) or a browser session that expires does not take back what was issued before (a logout
  // does: end-session/index.ts).
  expiresWithSession: async () => false,
  async issueRefreshToken(ctx, client) {
    return client.grantTypeAllowed('refresh_token') && decisionOf(ctx)?.extensions?.issue_refresh_token !== false;
  },
  rotateRefreshToken(ctx) {
    const { Client: client, RefreshToken: refreshToken } = ctx.oidc.entities;
    return client?.clientAuthMethod === 'none' || (refreshToken?.ttlPercentagePassed() ?? 0) >= 70;
  },
});

/**
 * What the token decision said that introspection must relay later is kept with the token
 * (opaque tokens store `extra` server-side; it is never visible to the client).
 */
export const decisionClaims: ConfigurationSlice = () => ({
  async extraTokenClaims(ctx) {
    const decision = decisionOf(ctx);
    const claims: Record<string, unknown> = {};
    if (decision?.obligations) claims.obligations = decision.obligations;
    if (decision?.extensions) claims.extensions = decision.extensions;
    // None granted is kept as none (every token without RAR would otherwise store an empty list).
    if (decision?.authorization_details?.length) claims.authorization_details = decision.authorization_details;
    if (decision?.jit_single_use) claims.jit_single_use = true;
    // Token exchange with an actor (src/oauth/token/grants/token-exchange): who acts for the subject.
    if (ctx.state.exchangeAct) claims.act = ctx.state.exchangeAct;
    if (ctx.state.exchangedFrom) claims[EXCHANGED_FROM] = ctx.state.exchangedFrom;
    if (ctx.state.exchangeDelegations) claims[DELEGATION_IDS] = ctx.state.exchangeDelegations;
    if (ctx.state.subjectIssuer) claims[SUBJECT_ISSUER] = ctx.state.subjectIssuer;
    if (ctx.state.claimScopes) claims[CLAIM_SCOPES] = ctx.state.claimScopes;
    // The UMA grant (src/oauth/token/grants/uma-ticket): what a requesting party token permits.
    if (ctx.state.umaPermissions) claims.permissions = ctx.state.umaPermissions;
    return Object.keys(claims).length ? claims : undefined;
  },
});

/**
 * RFC 8707: any absolute resource URI may be asked for. What a resource server offers a request
 * is what the policy decided for it, never what the client asked for: once a decision is known
 * (the `authorize` decision at /authorize, the `token` decision at /token), its scopes are the
 * resource server's scopes; before that (oidc-provider's first look at the request) the requested
 * ones, which the decision then narrows on the grant. A code or refresh token keeps every
 * resource of its authorization (RFC 8707 §2): a token request without `resource` is for its one
 * resource (useGrantedResource), and must name one when there are several (token/grants/gate.ts).
 */
export const resourceIndicators: ConfigurationSlice = (context) => ({
  features: {
    resourceIndicators: {
      enabled: true,
      defaultResource: defaultResourceForDetails(providerIssuer(context)) as never,
      useGrantedResource: async () => true,
      async getResourceServerInfo(ctx, resourceIndicator) {
        const decision = decisionOf(ctx);
        const offered = decision ? (decision.scopes ?? []) : (oidcParams(ctx).scope?.split(' ') ?? []);
        // Opaque, or RFC 9068 JWT where the resource server's record asks for it (jwt-access-tokens.ts).
        const format = await accessTokenFormatOf(context.store, context.tenant, resourceIndicator);
        return { scope: offered.join(' '), audience: resourceIndicator, ...resourceServerFormat(format) };
      },
    },
  },
});
