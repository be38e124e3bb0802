import type { Middleware, ParameterizedContext } from 'koa';
import type { AuditFacts } from '../audit/index.js';
import type { Decision } from '../policy/index.js';
import type { TenantState } from '../tenancy/index.js';
import type { Introspected } from './introspect/index.js';
import type { RptPermission } from './token/grants/uma-ticket/permissions.js';

/**
 * Koa's `ctx.state` behind the tenancy step, one type for every part of Arbiter that
 * reads or writes it (Koa<ArbiterState>, Router<ArbiterState>, Middleware<ArbiterState>).
 * oidc-provider's contexts carry the same object, untyped.
 */
export type ArbiterState = TenantState & {
  /** The request's audit entry in the making (src/audit); absent for requests that are not audited. */
  audit?: AuditFacts;
  /** What the policy said about this request, for oidc-provider's later hooks (token/grants/decision.ts). */
  policyDecision?: Decision;
  /** /introspect: the token and the decision, for the response Arbiter builds after oidc-provider's. */
  introspected?: Introspected;
  /** Token exchange with an actor: the issued token's `act` claim (token/shaping.ts). */
  exchangeAct?: Record<string, unknown>;
  /** The UMA grant: what the requesting party token permits (token/shaping.ts). */
  umaPermissions?: RptPermission[];
};

export type ArbiterContext = ParameterizedContext<ArbiterState>;
export type ArbiterMiddleware = Middleware<ArbiterState>;
