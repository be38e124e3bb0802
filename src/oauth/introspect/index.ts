import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import { HttpError } from '../../http/errors.js';
import type { DecisionOutcome } from '../../policy/index.js';
import { assertRegisteredAuthMethod } from '../clients/auth-method.js';
import type { ConfigurationSlice } from '../context.js';
import { findTokenByValue } from '../internals.js';
import { routes } from '../routes.js';
import { tokenCallers, type TokenCallers, type TokenRequirement } from '../shared/callers.js';
import { guardClientCredentials, requireClientCredential } from '../shared/credential-guard.js';
import { formBody, formParameter } from '../shared/form-body.js';
import type { ArbiterContext, ArbiterMiddleware, Introspected, TokenModel } from '../state.js';
import { decideIntrospection, parseContext, type Caller, type IntrospectionDeps } from './decide.js';
import { INACTIVE, introspectionBody, isSingleUse } from './response.js';
import { isClientLive } from '../shared/owned-artefacts.js';
import { standInForJwtAccessTokens } from '../token/jwt-access-tokens.js';
import { requestIssuer, type Tenant } from '../../tenancy/index.js';

/** A Bearer caller: a valid access token of this tenant with one of these scopes; any other is 401 invalid_token. */
const BEARER_CALLER: TokenRequirement = { scope: ['introspection', 'uma_protection'], lackingScope: 'invalid_token' };

export const INTROSPECT_PATH = routes.introspection;

export type IntrospectEndpointDeps = IntrospectionDeps & {
  providerFor(tenant: Tenant): Provider;
  maxBodyBytes: number;
};

/**
 * What Arbiter adds at /introspect, in order: the form read with the size limit, a request without
 * any credential refused with 401 invalid_client (a client_id alone is none: RFC 7662 §2.1 wants the
 * caller authorized, so public clients cannot introspect), a client that failed too often refused
 * before its credentials are verified, then Bearer callers and the `introspect` decision on every
 * call (introspectionEndpoint).
 */
export function introspectMiddleware(deps: IntrospectEndpointDeps): ArbiterMiddleware[] {
  return [
    formBody(deps.maxBodyBytes),
    requireClientCredential({ issuer: deps.issuer, publicClients: false, bearer: true }),
    guardClientCredentials,
    standInForJwtAccessTokens(deps.providerFor),
    introspectionEndpoint(deps),
  ];
}

/**
 * POST /introspect. Client-authenticated callers (Basic, post, private_key_jwt) go through
 * oidc-provider, whose allowedPolicy hook asks the policy (see `introspectionPolicy`);
 * Bearer callers are authenticated here. Either way the response is built by Arbiter from
 * the token and the decision, so both paths answer alike.
 */
function introspectionEndpoint(deps: IntrospectEndpointDeps) {
  const callers = tokenCallers(deps.providerFor);
  return async (ctx: ArbiterContext, next: Next): Promise<void> => {
    if (ctx.method !== 'POST') return next();
    assertContextParameter(ctx);
    const tenant = ctx.state.tenant.name;
    if (/^bearer /i.test(ctx.get('authorization'))) {
      await introspectForBearer(ctx, deps, callers, tenant);
    } else {
      await next();
    }
    const { introspected } = ctx.state;
    if (ctx.status !== 200 || !introspected) return;
    if (!introspected.allowed) {
      ctx.body = { ...INACTIVE };
      return;
    }
    ctx.body = await introspectionBody(
      deps.store,
      tenant,
      requestIssuer(deps.issuer, ctx.state.tenant),
      introspected.token,
      introspected.decision,
      introspected.resourceTypes,
    );
    if (isSingleUse(introspected.token, introspected.decision)) await introspected.token.destroy();
  };
}

/** oidc-provider's hook for client-authenticated callers. */
export const introspectionPolicy: ConfigurationSlice = ({ store, policy, tenant, config }) => ({
  features: {
    introspection: {
      enabled: true,
      async allowedPolicy(ctx, client, token) {
        assertRegisteredAuthMethod(ctx);
        // A token of a disabled or deleted client is inactive (RFC 7662 §2.2), whatever the policy says.
        if (!token.clientId || !(await isClientLive(store, tenant, token.clientId))) return false;
        const caller: Caller = { clientId: client.clientId, method: client.clientAuthMethod ?? 'unknown', scopes: [] };
        // oidc-provider's hook hands its own context and token types: the same objects as Arbiter's.
        const arbiterCtx = ctx as unknown as ArbiterContext;
        const model = token as unknown as TokenModel;
        return remember(
          arbiterCtx,
          model,
          await decideIntrospection(arbiterCtx, { store, policy, issuer: config.issuer }, tenant, model, caller),
        );
      },
    },
  },
});

async function introspectForBearer(
  ctx: ArbiterContext,
  deps: IntrospectEndpointDeps,
  callers: TokenCallers,
  tenant: string,
): Promise<void> {
  const { clientId, scopes } = await callers(ctx, BEARER_CALLER);
  const caller: Caller = { clientId, method: 'bearer', scopes };
  const provider = deps.providerFor(ctx.state.tenant);
  const value = formParameter(ctx, 'token');
  if (!value) throw new HttpError(400, 'invalid_request', "missing required parameter 'token'");
  ctx.status = 200;
  ctx.body = { ...INACTIVE };
  const token = (await findTokenByValue(provider, value, formParameter(ctx, 'token_type_hint'))) as
    TokenModel | undefined;
  if (!token?.isValid || !token.clientId || !(await isClientLive(deps.store, tenant, token.clientId))) return;
  remember(ctx, token, await decideIntrospection(ctx, deps, tenant, token, caller));
}

function remember(ctx: ArbiterContext, token: TokenModel, outcome: DecisionOutcome): boolean {
  const allowed = outcome.decision.allow && !outcome.engineError;
  const resourceTypes = outcome.input.request.resource_types;
  ctx.state.introspected = { token, allowed, decision: outcome.decision, resourceTypes } satisfies Introspected;
  return allowed;
}

function assertContextParameter(ctx: ArbiterContext): void {
  try {
    const context = parseContext(ctx);
    if (typeof context !== 'object' || context === null || Array.isArray(context)) throw new Error('not an object');
  } catch {
    throw new HttpError(400, 'invalid_request', 'context must be a JSON object');
  }
}
