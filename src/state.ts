import type { Middleware, ParameterizedContext } from 'koa';
import type { AuditState } from './audit/index.js';
import type { RequestState } from './http/state.js';
import type { OAuthState } from './oauth/index.js';
import type { TenantState } from './tenancy/index.js';

/**
 * Koa's `ctx.state` for the whole server, combined here from the part each layer declares beside
 * the code that fills it: the request's own (src/http/state.ts: its id, its parsed body, its
 * refusal's code), its tenant (src/tenancy, set by the root for the routes that have one), its
 * audit entry (src/audit) and the OAuth edge's (src/oauth/state.ts).
 */
export type ArbiterState = RequestState & TenantState & AuditState & OAuthState;
export type ArbiterContext = ParameterizedContext<ArbiterState>;
export type ArbiterMiddleware = Middleware<ArbiterState>;
