import type { ArbiterContext } from '../state.js';
import type Provider from 'oidc-provider';
import type { InteractionResults } from 'oidc-provider';
import { HttpError } from '../../http/errors.js';

export type Interaction = Awaited<ReturnType<Provider['interactionDetails']>>;

/**
 * The interaction this browser is in; its interaction cookie must name the one in the path.
 *
 * Not `provider.interactionDetails()`: that reads the cookie through a Koa context of the
 * provider's own, signed with the provider's cookie keys, while oidc-provider mounted in
 * Arbiter's app writes its cookies through Arbiter's context. Reading through the request's
 * context reads them exactly as they were written.
 */
export async function interactionOf(ctx: ArbiterContext, provider: Provider): Promise<Interaction> {
  const uid = ctx.cookies.get(provider.cookieName('interaction'));
  const interaction = uid && uid === ctx.params.uid ? await provider.Interaction.find(uid) : undefined;
  if (!interaction)
    throw new HttpError(
      400,
      'invalid_request',
      'this sign-in session was not found or has expired; start again from the application',
    );
  return interaction;
}

/**
 * Records the interaction's result and returns where the browser resumes the authorization
 * request (what `provider.interactionResult()` does, for the reason given above).
 * `mergeWithLastSubmission` keeps the result of the previous round (the login, when consenting).
 */
export async function finishInteraction(
  interaction: Interaction,
  result: InteractionResults,
  mergeWithLastSubmission: boolean,
): Promise<string> {
  interaction.result =
    mergeWithLastSubmission && !('error' in result) ? { ...interaction.lastSubmission, ...result } : result;
  await interaction.save(interaction.exp - Math.floor(Date.now() / 1000));
  return interaction.returnTo;
}
