import { AsyncLocalStorage } from 'node:async_hooks';
import type { AuditState } from './facts.js';

/** Undoes one thing a request issued: deletes a token or code from the store. */
export type Withdrawal = () => Promise<unknown>;

/** The withdrawals of what the request being answered has issued so far (see auditTrail). */
const issuedInRequest = new AsyncLocalStorage<Withdrawal[]>();

/** Runs `answer` (the rest of the request's steps) keeping in `issued` how to withdraw what it issues. */
export function collectingIssued<T>(issued: Withdrawal[], answer: () => Promise<T>): Promise<T> {
  return issuedInRequest.run(issued, answer);
}

/** oidc-provider's stored artefacts that are credentials or lead to one (its event names). */
const CREDENTIAL_MODELS = [
  'access_token',
  'client_credentials',
  'refresh_token',
  'authorization_code',
  'registration_access_token',
  'pushed_authorization_request',
  'backchannel_authentication_request',
  'device_code',
];

interface Destroyable {
  destroy(): Promise<unknown>;
}

/**
 * Makes every credential `provider` (one tenant's oidc-provider) stores withdrawable by the
 * request that stored it: oidc-provider emits `<model>.saved` once the artefact is in the store,
 * in the request's own async context, and its `destroy` deletes it there again. A request whose
 * audit entry cannot be written withdraws them (auditTrail). Every access token is opaque, so
 * a deleted one is dead everywhere at once.
 */
export function withdrawableCredentials(provider: {
  on(event: string, listener: (artefact: Destroyable) => void): unknown;
}): void {
  for (const model of CREDENTIAL_MODELS)
    provider.on(`${model}.saved`, (artefact) => issuedInRequest.getStore()?.push(() => artefact.destroy()));
}

/** Authorization errors that say the server failed, rather than that the request was refused. */
const AUTHORIZATION_FAULTS = new Set(['server_error', 'temporarily_unavailable']);

/**
 * oidc-provider sends an authorization request's error to the client's redirect_uri (a 302 or a
 * form post), which the audit log alone would read as a request allowed: each is noted in the
 * request's entry instead, as `deny` (or `error` for a fault), so that a caller nobody
 * authenticated is counted against its budget for it like for any refusal.
 */
export function auditedAuthorizationErrors(provider: {
  on(
    event: string,
    listener: (ctx: { state?: AuditState & { errorCode?: string } }, error: { error?: string }) => void,
  ): unknown;
}): void {
  const noted = (ctx: { state?: AuditState & { errorCode?: string } }, error: { error?: string }, fault: boolean) => {
    if (!ctx.state?.audit || ctx.state.audit.outcome) return;
    ctx.state.audit.outcome = fault || AUTHORIZATION_FAULTS.has(error.error ?? '') ? 'error' : 'deny';
    if (error.error) ctx.state.errorCode ??= error.error;
  };
  provider.on('authorization.error', (ctx, error) => noted(ctx, error, false));
  provider.on('server_error', (ctx, error) => noted(ctx, error, true));
}

/** Withdraws everything in `issued`; resolves with how many withdrawals failed, and the first reason. */
export async function withdrawAll(issued: Withdrawal[]): Promise<{ failed: number; reason?: unknown }> {
  const outcomes = await Promise.allSettled(issued.map((withdraw) => withdraw()));
  const failures = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  return { failed: failures.length, reason: failures[0]?.reason };
}
