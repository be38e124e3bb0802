import type { Outcome } from './log.js';

/** What protocol code tells the audit log about the decision it asked for. */
export interface AuditFacts {
  policyInput?: unknown;
  policyDecision?: unknown;
  outcome?: Outcome;
  clientId?: string | null;
  subjectId?: string | null;
  /** When the tenant is not the request's X-Tenant-Id (Admin API writes name theirs in body or query). */
  tenantId?: string | null;
  /**
   * The Admin API key that made the call, by id (null: the bootstrap key), name and role; never the
   * key. `session`: an operator's console session (sign-in.ts), named after the operator, id null.
   */
  adminKey?: { id: number | null; name: string; role: string; tenants?: string[]; session?: true };
  /**
   * The caller presented a credential that was accepted (true: markAuthenticated), or asked a
   * decision without one (false: markUnauthenticated); absent, the audit log judges by itself.
   */
  authenticated?: boolean;
  /**
   * What an endpoint that asks no decision did, kept in the entry's requestSummary as `result`
   * (/revoke: the kind of token, whose, revoked or not and why). Never a secret.
   */
  result?: Record<string, string | boolean | null>;
}

/** The audit log's part of `ctx.state`: the request's entry in the making, absent for requests that are not audited (auditTrail). */
export type AuditState = { audit?: AuditFacts };

/** The request's audit entry in the making; a throwaway object when the request is not audited. */
export function auditFactsOf(state: AuditState): AuditFacts {
  return state.audit ?? {};
}

/**
 * Tells the audit log that the request's caller is authenticated (an Admin API key, an access
 * token accepted): its entry is written in full, whatever the answer. Requests nobody
 * authenticated that asked for no decision are bounded instead (see auditTrail).
 */
export function markAuthenticated(state: AuditState): void {
  if (state.audit) state.audit.authenticated = true;
}

/**
 * Tells the audit log that the request asks a decision for a caller who presented no credential
 * (an open registration): its entry is bounded, and its refusals count against the caller's
 * address (AUDIT_UNAUTHENTICATED_LIMIT), as those of a request that asks none. A later
 * markAuthenticated (the registration succeeded) still has it written in full.
 */
export function markUnauthenticated(state: AuditState): void {
  if (state.audit && state.audit.authenticated === undefined) state.audit.authenticated = false;
}

/** The request of one of oidc-provider's events, as far as the audit log reads it. */
type EventContext = { state?: AuditState & { errorCode?: string } };

/** Authorization errors that say the server failed, rather than that the request was refused. */
const AUTHORIZATION_FAULTS = new Set(['server_error', 'temporarily_unavailable']);

/**
 * oidc-provider sends an authorization request's error to the client's redirect_uri (a 302 or a
 * form post), which the audit log alone would read as a request allowed: each is noted in the
 * request's entry instead, as `deny` (or `error` for a fault), so that a caller nobody
 * authenticated is counted against its budget for it like for any refusal.
 */
export function auditedAuthorizationErrors(provider: {
  on(event: string, listener: (ctx: EventContext, error: { error?: string }) => void): unknown;
}): void {
  const noted = (ctx: EventContext, error: { error?: string }, fault: boolean) => {
    if (!ctx.state?.audit || ctx.state.audit.outcome) return;
    ctx.state.audit.outcome = fault || AUTHORIZATION_FAULTS.has(error.error ?? '') ? 'error' : 'deny';
    if (error.error) ctx.state.errorCode ??= error.error;
  };
  provider.on('authorization.error', (ctx, error) => noted(ctx, error, false));
  provider.on('server_error', (ctx, error) => noted(ctx, error, true));
}
