import { AsyncLocalStorage } from 'node:async_hooks';

/** Undoes one thing a request issued: deletes a token or code from the store. */
export type Withdrawal = () => Promise<unknown>;

/** The withdrawals of what the request being answered has issued so far (see auditTrail). */
const issuedInRequest = new AsyncLocalStorage<Withdrawal[]>();

/** Runs `answer` (the rest of the request's steps) keeping in `issued` how to withdraw what it issues. */
export function collectingIssued<T>(issued: Withdrawal[], answer: () => Promise<T>): Promise<T> {
  return issuedInRequest.run(issued, answer);
}

/**
 * Tells the audit trail how to withdraw a credential this request stored itself (a console
 * session), should its audit entry not be written.
 */
export function withdrawableIfUnaudited(withdrawal: Withdrawal): void {
  issuedInRequest.getStore()?.push(withdrawal);
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

/** Withdraws everything in `issued`; resolves with how many withdrawals failed, and the first reason. */
export async function withdrawAll(issued: Withdrawal[]): Promise<{ failed: number; reason?: unknown }> {
  const outcomes = await Promise.allSettled(issued.map((withdraw) => withdraw()));
  const failures = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  return { failed: failures.length, reason: failures[0]?.reason };
}
