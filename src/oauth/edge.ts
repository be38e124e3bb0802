import type { Config } from '../config/index.js';
import { assertSingleValued } from '../http/parameters.js';
import type { Logger } from '../log/index.js';
import type { PolicyEngine } from '../policy/index.js';
import type { Sealer, Store } from '../store/index.js';
import { assertKnownTenant, type Tenant, type TenantRegistry } from '../tenancy/index.js';
import { authorizationResumptionMiddleware, authorizeMiddleware } from './authorize/index.js';
import { discoveryExtras, umaConfigurationAsDiscovery } from './discovery.js';
import {
  deviceAuthorizationMiddleware,
  deviceResumptionMiddleware,
  deviceVerificationMiddleware,
} from './device/index.js';
import { endSessionConfirmationMiddleware, endSessionMiddleware } from './end-session/index.js';
import { interactionRoutes } from './interactions/index.js';
import { introspectMiddleware } from './introspect/index.js';
import { parMiddleware } from './par/index.js';
import type { TenantProviders } from './providers.js';
import { registrationMiddleware } from './register/index.js';
import { revokeMiddleware } from './revoke/index.js';
import { proofsForOrigins } from './shared/dpop-origin.js';
import { assertShallowJson } from './shared/form-body.js';
import { addTenantHint } from './shared/tenant-hint.js';
import type { ArbiterContext, ArbiterMiddleware } from './state.js';
import { tokenMiddleware } from './token/index.js';
import { userinfoMiddleware } from './userinfo/index.js';

export interface OAuthEdgeDeps {
  config: Config;
  store: Store;
  sealer: Sealer;
  policy: PolicyEngine;
  providers: TenantProviders;
  log: Logger;
}

/**
 * What Arbiter adds at each endpoint of the OAuth/OpenID Connect edge, in order, before
 * oidc-provider (`provider`, one instance per tenant) answers: the steps of the route table's
 * protocol rows (src/routes.ts says which path runs which). Protocol code asks the policy engine
 * and relays its decision, it never decides.
 */
export function oauthSteps({ config, store, sealer, policy, providers, log }: OAuthEdgeDeps) {
  const providerFor = (tenant: Tenant) => providers.provider(tenant);
  const authorizationDetailsTypes = () => policy.authorizationDetailsTypes();
  const { issuer, maxBodyBytes } = config;
  const registration = registrationMiddleware({ config, store, sealer, policy });
  const signIn = [interactionRoutes({ config, store, sealer, providers, log })];
  const discovery = discoveryExtras(issuer, authorizationDetailsTypes, config.mtlsEndpointBaseUrl);
  // Each of /authorize's sign-ins, /device/auth and public clients' /par counts its own.
  const perAddress = { perAddress: config.signInsPerAddress, windowSeconds: config.signInsWindowSeconds };
  return {
    authorize: authorizeMiddleware({ store, providerFor, maxBodyBytes, signIns: perAddress }),
    authorizationResumption: authorizationResumptionMiddleware(),
    par: parMiddleware({ store, providerFor, maxBodyBytes, perAddress }),
    deviceAuthorization: deviceAuthorizationMiddleware({ issuer, store, providerFor, maxBodyBytes, perAddress }),
    deviceResumption: deviceResumptionMiddleware(providerFor),
    deviceVerification: deviceVerificationMiddleware(
      { limit: config.authFailureLimit, windowSeconds: config.authFailureWindowSeconds },
      store,
      providerFor,
    ),
    token: tokenMiddleware({ issuer, maxBodyBytes }),
    introspect: introspectMiddleware({ store, policy, issuer, providerFor, maxBodyBytes, mtls: config }),
    revoke: revokeMiddleware({ issuer, maxBodyBytes, providerFor }),
    userinfo: userinfoMiddleware(maxBodyBytes),
    register: registration.register,
    clientConfiguration: registration.clientConfiguration,
    endSession: endSessionMiddleware({ issuer, maxBodyBytes }),
    endSessionConfirmation: endSessionConfirmationMiddleware({ store, providerFor, maxBodyBytes }),
    discovery: [discovery],
    umaConfiguration: [umaConfigurationAsDiscovery, discovery],
    signIn,
    provider: providers.middleware(),
  };
}

/** How a protocol route's request is framed (protocolRequest). */
export interface ProtocolFraming {
  /** Token, authorization and registration answers are never cached (RFC 6749 §5.1). */
  uncached?: boolean;
  /** The query parameters this endpoint lets repeat (RFC 8707: `resource` at /authorize). */
  repeatable?: readonly string[];
  /** An oidc-provider endpoint: JSON-valued query parameters kept shallow, its invalid_client answers given the tenant hint. */
  oidc?: boolean;
}

/**
 * The first step of every protocol route (the OAuth edge and Arbiter's protected APIs): the
 * request's tenant exists, a DPoP proof it carries is for one of `origins` (this server's: ISSUER's
 * and the mTLS alias base's; proofsForOrigins), and its provider is ready (its keys read once per rotation) for every
 * step below that asks for it; the query is single-valued (and shallow, at oidc-provider's
 * endpoints); answers of uncached endpoints carry no-store, set first so that errors thrown
 * below carry it too.
 */
export function protocolRequest(
  tenants: TenantRegistry,
  providers: TenantProviders,
  origins: readonly string[],
  { uncached = false, repeatable = [], oidc = false }: ProtocolFraming = {},
): ArbiterMiddleware {
  const prepare = providers.prepare();
  const assertProofForUs = proofsForOrigins(origins);
  return async function protocol(ctx: ArbiterContext, next) {
    await assertKnownTenant(tenants, ctx.state);
    assertProofForUs(ctx);
    // The tenant's oidc-provider made ready here, once, for every step below (its middleware has nothing to call next).
    await prepare(ctx, async () => {});
    assertSingleValued(ctx.querystring, 'query parameter', repeatable);
    if (uncached) {
      ctx.set('Cache-Control', 'no-store');
      ctx.set('Pragma', 'no-cache');
    }
    if (!oidc) return next();
    assertShallowJson(ctx.query);
    await next();
    addTenantHint(ctx);
  };
}
