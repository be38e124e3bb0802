import { signInBudget, type SignInLimits } from './sign-in-budget.js';
import type { ArbiterMiddleware } from '../state.js';
import type Provider from 'oidc-provider';
import type { Store } from '../../store/index.js';
import { auditSignInFailure } from '../interactions/index.js';
import { routes } from '../routes.js';
import { formBody } from '../shared/form-body.js';
import { REPEATABLE_PARAMETERS } from '../shared/resources.js';
import { acceptPlainPkce } from './pkce-plain.js';
import { authorizationPostAsGet } from './post-as-get.js';
import { authorizeRedirectsAs302 } from './redirect-status.js';
import { readRequestObject } from './request-object.js';
import { requireRedirectUri } from './required-redirect-uri.js';
import { recognizeRequestedScopes } from './scope-vocabulary.js';
import type { Tenant } from '../../tenancy/index.js';

export { policyConsent } from './grant.js';
export { authorizationParameters } from './parameters.js';
export { acceptPlainPkce } from './pkce-plain.js';
export { readRequestObject } from './request-object.js';
export { requireRedirectUri } from './required-redirect-uri.js';
export { recognizeRequestedScopes } from './scope-vocabulary.js';

export const AUTHORIZE_PATH = routes.authorization;

export interface AuthorizeDeps {
  store: Store;
  providerFor: (tenant: Tenant) => Provider;
  maxBodyBytes: number;
  signIns: SignInLimits;
}

/**
 * What Arbiter adds at /authorize in front of oidc-provider, in order: the form of a POST read
 * with the size limit and a POST sent on as a GET, the parameters of a request object or pushed
 * request read (what the steps after it check), redirect_uri required, PKCE `plain` accepted, the
 * requested scopes the client registered made known, 302 redirects (the RAR types and scopes of
 * policy data are the provider's own, built per policy revision: providers.ts). The decision
 * itself is the `loadExistingGrant` hook (grant.ts), and the extra parameter checks are
 * oidc-provider `extraParams` (parameters.ts).
 */
export function authorizeMiddleware({ store, providerFor, maxBodyBytes, signIns }: AuthorizeDeps): ArbiterMiddleware[] {
  return [
    // First: an address past its sign-ins is refused before anything is read or stored.
    signInBudget(signIns),
    // A POST's form may repeat `resource` as the query does (RFC 8707); it is sent on as a GET.
    formBody(maxBodyBytes, REPEATABLE_PARAMETERS),
    authorizationPostAsGet,
    readRequestObject(providerFor),
    requireRedirectUri,
    acceptPlainPkce,
    recognizeRequestedScopes(store, providerFor),
    authorizeRedirectsAs302,
  ];
}

/** /authorize/:uid, where oidc-provider resumes the authorization request after sign-in: 302 redirects, a failed sign-in audited. */
export function authorizationResumptionMiddleware(): ArbiterMiddleware[] {
  return [authorizeRedirectsAs302, auditSignInFailure];
}
