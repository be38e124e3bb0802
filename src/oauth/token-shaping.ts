import type { ConfigurationSlice } from './context.js';
import { decisionOf } from './grants/decision.js';
import { defaultResourceForDetails } from './rar.js';

/** Client authentication methods of the spec (client_secret_jwt is not offered: secrets are stored hashed). */
export const clientAuthentication: ConfigurationSlice = () => ({
  clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'],
});

/**
 * Refresh tokens: the authorization_code grant issues one by default (no offline_access
 * needed) unless the policy withholds it with `extensions.issue_refresh_token: false`;
 * public clients rotate on every use.
 */
export const refreshTokens: ConfigurationSlice = () => ({
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
    if (!decision) return undefined;
    const claims: Record<string, unknown> = {};
    if (decision.obligations) claims.obligations = decision.obligations;
    if (decision.extensions) claims.extensions = decision.extensions;
    if (decision.authorization_details) claims.authorization_details = decision.authorization_details;
    if (decision.jit_single_use) claims.jit_single_use = true;
    return Object.keys(claims).length ? claims : undefined;
  },
});

/**
 * RFC 8707: any absolute resource URI may be asked for; the policy, not a static table,
 * decides which scopes a token for it carries (the gate has already narrowed them).
 */
export const resourceIndicators: ConfigurationSlice = ({ config }) => ({
  features: {
    resourceIndicators: {
      enabled: true,
      defaultResource: defaultResourceForDetails(config.issuer) as never,
      useGrantedResource: async () => true,
      async getResourceServerInfo(ctx, resourceIndicator) {
        const decided = decisionOf(ctx)?.scopes ?? [];
        const requested = (ctx.oidc.params?.scope as string | undefined)?.split(' ') ?? [];
        return { scope: [...new Set([...decided, ...requested])].join(' '), audience: resourceIndicator, accessTokenFormat: 'opaque' };
      },
    },
  },
});
