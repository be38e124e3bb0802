import type { InteractionResults } from 'oidc-provider';

/**
 * A sign-in that cannot go on. It does not become an HTTP error of Arbiter's own: the
 * interaction is finished with it, so the client receives `error` and `state` at its
 * redirect_uri exactly as for any other authorization error.
 */
export class SignInError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    /** What went wrong underneath, for the operator's log only. */
    cause?: unknown,
  ) {
    super(description, { cause });
    this.name = 'SignInError';
  }

  get result(): InteractionResults {
    return { error: this.error, error_description: this.description };
  }
}

/** An identity provider that is missing, unreachable or misconfigured: the client may retry later. */
export const unavailable = (description: string, cause?: unknown) =>
  new SignInError('temporarily_unavailable', description, cause);
