import compose from 'koa-compose';
import type { Middleware } from 'koa';
import type Provider from 'oidc-provider';
import type { PolicyEngine } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { acceptPlainPkce } from './pkce-plain.js';
import { authorizeRedirectsAs302 } from './redirect-status.js';
import { requireRedirectUri } from './required-redirect-uri.js';
import { recognizeRequestedScopes } from './scope-vocabulary.js';

export { policyConsent } from './grant.js';
export { authorizationParameters } from './parameters.js';

/**
 * What Arbiter adds at /authorize in front of oidc-provider: redirect_uri required, PKCE `plain`
 * accepted, the requested scopes of the tenant's vocabulary made known, 302 redirects. The decision itself is the `loadExistingGrant` hook (grant.ts), and
 * the extra parameter checks are oidc-provider `extraParams` (parameters.ts).
 */
export function authorizeEndpoint(store: Store, policy: PolicyEngine, providerFor: (tenant: string) => Provider): Middleware {
  return compose([requireRedirectUri, acceptPlainPkce, recognizeRequestedScopes(store, policy, providerFor), authorizeRedirectsAs302]) as Middleware;
}
