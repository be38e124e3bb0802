export { interactionRoutes, UPSTREAM_CALLBACK_PATH, type InteractionDeps } from './router.js';
export { UPSTREAM_LOGOUT_PATH } from './upstream-logout.js';
export { auditSignInFailure } from './audit.js';
export { INTERACTION_PATH, interactionsSlice } from './slice.js';
export { grantConsent } from './consent.js';
export { UPSTREAM_IDP_PARAM } from './identity-providers.js';
export { UpstreamProviders } from './upstream.js';
export { enabledIdentityProvider } from './identity-providers.js';
export { SignInError } from './errors.js';
