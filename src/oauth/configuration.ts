import type { Configuration } from 'oidc-provider';
import type { TtlConfig } from '../config/index.js';
import { policyConsent } from './authorize/grant.js';
import { authorizationParameters } from './authorize/parameters.js';
import { requestObjects } from './authorize/request-object.js';
import { accounts } from './userinfo/accounts.js';
import { claims, scopes } from './claims.js';
import { introspectionConfiguration } from './introspect/index.js';
import { revocationPolicy } from './revoke/index.js';
import { mergeSlices, type ConfigurationSlice, type ProviderContext } from './context.js';
import { interactionsSlice } from './interactions/index.js';
import { richAuthorizationRequests } from './shared/rar.js';
import { outboundFetch } from './outbound-fetch.js';
import { routes } from './routes.js';
import { clientAuthentication, decisionClaims, refreshTokens, resourceIndicators } from './token/shaping.js';
import { errorPages } from './error-pages.js';
import { jwtAccessTokens } from './token/jwt-access-tokens.js';
import { pushedAuthorizationRequests } from './par/index.js';
import { deviceFlow } from './device/index.js';
import { backchannelLogout } from './end-session/backchannel.js';
import { logoutPages } from './end-session/pages.js';
import { dpopNonces } from './shared/dpop-nonces.js';
import { fapi2Security, withPs256Keys } from './fapi/index.js';
import { mutualTls } from './mtls/index.js';
import { DEFAULT_TENANT } from '../store/index.js';

/**
 * The protocol surface the spec allows: code flow only, RS256, the spec's paths and scopes. The
 * scopes oidc-provider knows (it drops any other from a request that names no resource) are the
 * spec's and those policy data names, as of the provider's policy revision.
 */
const protocol: ConfigurationSlice = ({ vocabulary }) => ({
  routes,
  claims,
  scopes: [...new Set([...scopes, ...vocabulary.scopes])],
  responseTypes: ['code'],
  enabledJWA: { idTokenSigningAlgValues: ['RS256'] },
  conformIdTokenClaims: true,
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true }, // advertised in discovery only: /register and /register/* are answered by register/gate.ts, never by oidc-provider
    userinfo: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: { enabled: true },
    // OIDC Core §5.5; which claims are released is decided in authorize/claims-request.ts and grant.ts.
    claimsParameter: { enabled: true },
  },
  discovery: {
    claim_types_supported: undefined,
  },
});

/**
 * Keys shared by every node: signing keys and cookie keys come from the store. The provider of a
 * tenant's own issuer (/t/<tenant>) keeps its session cookie below that path, so that the sessions
 * of tenants reached by path on one host never overwrite each other's (nor the shared issuer's).
 * The interaction cookies keep oidc-provider's own paths (one interaction's URL each, below the
 * tenant's path already): given the tenant's path, two sign-ins under way in one browser shared
 * one cookie, and the first to finish failed. Every provider but the default tenant's names its
 * cookies after itself (tenantCookieNames).
 */
const secrets: ConfigurationSlice = ({ secrets: { jwks, cookieKeys }, basePath, tenant }) => ({
  jwks: { keys: withPs256Keys(jwks.keys) },
  cookies: {
    keys: cookieKeys,
    ...(basePath ? { long: { path: basePath } } : {}),
    ...tenantCookieNames(tenant, basePath),
  },
});

/**
 * The cookie names of a tenant's provider: oidc-provider's own for the default tenant's (sessions
 * signed in before stay), `<name>~<tenant>` for a tenant named by X-Tenant-Id and
 * `<name>~t~<tenant>` for one reached by path (`~` is in no tenant id). A cookie at `/` goes with
 * every request below it: under one name, a provider that could not check another's signature
 * deleted it (found 2026-11-29: one visit to /t/<tenant>/authorize signed the browser out of the
 * default tenant), and the tenants named by X-Tenant-Id, all at `/`, overwrote each other's session.
 */
export function tenantCookieNames(tenant: string, basePath: string): { names?: Record<string, string> } {
  if (tenant === DEFAULT_TENANT && !basePath) return {};
  // A cookie's signature travels as `<name>.sig` (the cookies module): a tenant named `acme.sig`
  // would own tenant acme's signature cookie, and signing in at one signed the browser out of the
  // other. Such a tenant's names end in `~`, which no tenant id holds (found 2026-11-30).
  const id = tenant.endsWith('.sig') ? `${tenant}~` : tenant;
  const suffix = basePath ? `~t~${id}` : `~${id}`;
  return {
    names: {
      session: `_session${suffix}`,
      interaction: `_interaction${suffix}`,
      resume: `_interaction_resume${suffix}`,
    },
  };
}

/** oidc-provider's lifetimes from configuration (README documents the defaults); the bench's baseline takes the same. */
export function providerTtl(ttl: TtlConfig): Configuration['ttl'] {
  return {
    AccessToken: ttl.accessTokenSeconds,
    AuthorizationCode: ttl.authorizationCodeSeconds,
    ClientCredentials: ttl.accessTokenSeconds,
    IdToken: ttl.idTokenSeconds,
    RefreshToken: ttl.refreshTokenSeconds,
    Session: ttl.sessionSeconds,
    Interaction: ttl.interactionSeconds,
    Grant: ttl.refreshTokenSeconds,
    DeviceCode: ttl.deviceCodeSeconds,
  };
}

const lifetimes: ConfigurationSlice = ({ config: { ttl } }) => ({ ttl: providerTtl(ttl) });

/** Every slice, in order; later slices win on conflicting top-level keys. */
export const SLICES: ConfigurationSlice[] = [
  protocol,
  secrets,
  lifetimes,
  clientAuthentication,
  // RFC 8705 mutual TLS where configured: after clientAuthentication, whose methods it extends.
  mutualTls,
  refreshTokens,
  decisionClaims,
  resourceIndicators,
  // RFC 9068 JWT access tokens for the resource servers whose record asks for them.
  jwtAccessTokens,
  authorizationParameters,
  pushedAuthorizationRequests,
  deviceFlow,
  requestObjects,
  policyConsent,
  interactionsSlice,
  accounts,
  introspectionConfiguration,
  revocationPolicy,
  richAuthorizationRequests,
  outboundFetch,
  errorPages,
  backchannelLogout,
  logoutPages,
  dpopNonces,
  fapi2Security,
];

export function providerConfiguration(context: ProviderContext): Configuration {
  return mergeSlices(SLICES, context);
}
