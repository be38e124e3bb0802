import type { InteractionResults } from 'oidc-provider';

/**
 * The consent prompt, answered without a screen and without granting anything here: what a
 * client gets is the `authorize` decision, which `loadExistingGrant` (src/oauth/authorize/grant.ts)
 * applies to a grant of this authorization's own when the request resumes. oidc-provider asks
 * for consent only where that grant cannot settle it by itself (authorization_details are
 * always put to a consent round); answering it is all that is needed.
 */
export function grantConsent(): InteractionResults {
  return { consent: {} };
}
