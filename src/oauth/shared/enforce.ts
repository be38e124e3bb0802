import { errors } from 'oidc-provider';
import {
  enforceHttp,
  httpRefusal,
  refusalOf,
  type DecisionOutcome,
  type DenyRules,
  type Refusal,
} from '../../policy/index.js';

export { httpRefusal, refusalOf, type DenyRules, type Refusal };

/**
 * A refusal inside oidc-provider (the grants, the authorize hook): its own error class, so that
 * it answers `{error, error_description}` at /token, or redirects the error to the client at
 * /authorize, as it does for its own errors.
 */
export function oauthRefusal({ status, error, error_description: description }: Refusal): Error {
  const refusal = new errors.CustomOIDCProviderError(error, description);
  if (status !== refusal.status) Object.assign(refusal, { status, statusCode: status });
  return refusal;
}

/** Enforces a decision: returns on an allow, throws the refusal otherwise (an engine failure: 503). */
export const enforce = {
  ...enforceHttp,
  /** Inside oidc-provider. */
  oauth(outcome: DecisionOutcome, rules?: DenyRules): void {
    const refusal = refusalOf(outcome, rules);
    if (refusal) throw oauthRefusal(refusal);
  },
};
