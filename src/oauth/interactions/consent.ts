import type { Context } from 'koa';
import type Provider from 'oidc-provider';
import type { InteractionResults } from 'oidc-provider';
import type { Interaction } from './interaction.js';
type AuthorizationDetail = NonNullable<InstanceType<Provider['Grant']>['rar']>[number];

/** What oidc-provider's consent prompt says is not granted yet. */
interface MissingConsent {
  missingOIDCScope?: string[];
  missingOIDCClaims?: string[];
  missingResourceScopes?: Record<string, string[]>;
  rar?: AuthorizationDetail[];
}

/**
 * Arbiter shows no consent screen: what a client may get is the policy engine's decision,
 * not the user's click. This step grants what the consent prompt found missing (OIDC
 * scopes and claims, resource scopes, authorization details) on the interaction's grant.
 * It is the one place where the `authorize` decision is to be taken before granting.
 */
export async function grantConsent(_ctx: Context, provider: Provider, interaction: Interaction): Promise<InteractionResults> {
  const missing = interaction.prompt.details as MissingConsent;
  const grant = (interaction.grantId ? await provider.Grant.find(interaction.grantId) : undefined)
    ?? new provider.Grant({ accountId: interaction.session?.accountId, clientId: String(interaction.params.client_id) });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope);
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes);
  for (const detail of missing.rar ?? []) grant.addRar(detail);
  return { consent: { grantId: await grant.save() } };
}
