import { interactionPolicy } from 'oidc-provider';
import type { ConfigurationSlice } from '../context.js';
import { UPSTREAM_IDP_PARAM } from './identity-providers.js';

/** The sign-in's own pages (src/oauth/interactions/router.ts): `/interaction/:uid` and below. */
export const INTERACTION_PATH = '/interaction';

/** Where oidc-provider sends the user agent when the user must sign in or consent. */
export const interactionPath = (uid: string) => `${INTERACTION_PATH}/${uid}`;

/**
 * Arbiter's own interactions instead of oidc-provider's development forms: sign-in at an
 * upstream identity provider, consent by policy. The client may name the upstream
 * provider with the `upstream_idp` authorization request parameter.
 */
export const interactionsSlice: ConfigurationSlice = ({ basePath }) => ({
  interactions: {
    url: (_ctx, interaction) => `${basePath}${interactionPath(interaction.uid)}`,
    policy: INTERACTION_POLICY,
  },
  // The object form merges with other slices' extraParams (src/oauth/context.ts).
  extraParams: { [UPSTREAM_IDP_PARAM]: null },
});

/**
 * oidc-provider accepts only the prompt values its policy knows. `select_account` is the
 * upstream provider's business, so it becomes a prompt of its own that sends the user
 * upstream like `login` does, even when an Arbiter session exists.
 */
function policyWithAccountSelection() {
  const policy = interactionPolicy.base();
  const consentIndex = policy.findIndex((prompt) => prompt.name === 'consent');
  policy.add(new interactionPolicy.Prompt({ name: 'select_account', requestable: true }), consentIndex);
  return policy;
}

/**
 * Made once for every tenant's provider: it depends on no tenant, oidc-provider only reads it,
 * and keeps it by reference (its configuration clones plain objects and arrays, not the prompts
 * and checks inside), so each provider built no longer holds its own ~5 KB of prompts and checks.
 */
const INTERACTION_POLICY = policyWithAccountSelection();
