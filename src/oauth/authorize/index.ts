import compose from 'koa-compose';
import type { Middleware } from 'koa';
import { acceptPlainPkce } from './pkce-plain.js';
import { authorizeRedirectsAs302 } from './redirect-status.js';
import { requireRedirectUri } from './required-redirect-uri.js';

export { policyConsent } from './grant.js';
export { authorizationParameters } from './parameters.js';

/**
 * What Arbiter adds at /authorize in front of oidc-provider: redirect_uri required, PKCE `plain`
 * accepted, 302 redirects. The decision itself is the `loadExistingGrant` hook (grant.ts), and
 * the extra parameter checks are oidc-provider `extraParams` (parameters.ts).
 */
export function authorizeEndpoint(): Middleware {
  return compose([requireRedirectUri, acceptPlainPkce, authorizeRedirectsAs302]) as Middleware;
}
