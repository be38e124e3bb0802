import type { Context, Next } from 'koa';
import { isAdminPath } from '../admin/gate.js';
import { basicCredentials } from '../http/basic.js';
import type { Logger } from '../log/index.js';
import type { AuditLog, Outcome } from './log.js';
import { bodyParams, summarizeRequest } from './summary.js';

/** What protocol code tells the audit log about the decision it asked for. */
export interface AuditFacts {
  policyInput?: unknown;
  policyDecision?: unknown;
  outcome?: Outcome;
  clientId?: string | null;
  subjectId?: string | null;
  /** When the tenant is not the request's X-Tenant-Id (Admin API writes name theirs in body or query). */
  tenantId?: string | null;
}

const PROTOCOL_PREFIXES = ['/authorize', '/token', '/introspect', '/register', '/userinfo', '/resource_registration', '/permission', '/delegation', '/access/v1'];

/** Every Admin API call (refused ones and every spelling of its paths included) and every protocol request. */
export function isAudited(path: string): boolean {
  if (isAdminPath(path)) return true;
  return PROTOCOL_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}

/**
 * Records one entry per audited request, after it has been answered and before the answer goes
 * out: the caller is answered once its entry is stored (in a batch shared with concurrent
 * requests, see AuditLog), so a crash cannot lose the entry of an answered request. A failed
 * write is logged, never surfaced. Mounted outside the JSON error handler so that it sees the
 * status the caller got, not the one a handler had set before it threw.
 */
export function auditTrail(audit: AuditLog, log: Logger) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!isAudited(ctx.path)) return next();
    ctx.state.audit = {} as AuditFacts;
    try {
      await next();
    } finally {
      await audit.append(entryFor(ctx)).catch((error: unknown) => log.error({ err: error, requestId: ctx.state.requestId }, 'audit write failed'));
    }
  };
}

function entryFor(ctx: Context) {
  const facts = ctx.state.audit as AuditFacts;
  return {
    endpoint: ctx.path,
    method: ctx.method,
    requestSummary: { ...summarizeRequest(ctx), status: ctx.status, ...(ctx.state.errorCode ? { error: ctx.state.errorCode } : {}) },
    policyInput: facts.policyInput ?? null,
    policyDecision: facts.policyDecision ?? null,
    outcome: facts.outcome ?? outcomeOf(ctx.status),
    tenantId: facts.tenantId !== undefined ? facts.tenantId : (ctx.state.tenantId ?? null),
    clientId: facts.clientId ?? clientIdOf(ctx),
    subjectId: facts.subjectId ?? null,
    ip: ctx.ip || null,
    userAgent: ctx.get('user-agent') || null,
    requestId: (ctx.state.requestId as string | undefined) ?? null,
  };
}

function outcomeOf(status: number): Outcome {
  if (status >= 500) return 'error';
  return status >= 400 ? 'deny' : 'allow';
}

function clientIdOf(ctx: Context): string | null {
  const oidcClient = (ctx as unknown as { oidc?: { client?: { clientId?: string } } }).oidc?.client?.clientId;
  return oidcClient ?? stringParam(ctx, 'client_id') ?? basicUsername(ctx.get('authorization'));
}

/** client_id as the caller named it, also when authentication failed (from the query or the parsed form). */
function stringParam(ctx: Context, name: string): string | null {
  const value = ctx.query[name] ?? (bodyParams(ctx) as Record<string, unknown>)[name];
  return typeof value === 'string' && value !== '' ? value : null;
}

/** The client id of a Basic Authorization header, also when its secret is wrong. */
function basicUsername(authorization: string): string | null {
  return basicCredentials(authorization)?.id || null;
}
