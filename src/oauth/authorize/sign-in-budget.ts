import { INTERACTION_PATH } from '../interactions/slice.js';
import { addressBudget, type AddressLimits } from '../shared/address-budget.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';

export type SignInLimits = AddressLimits;

/**
 * An authorization request that needs the user sends the browser to sign in, and oidc-provider
 * stores its interaction (about 12 KB with its session) until it ends or expires: anyone may do
 * that with a public client's client_id, so one address could fill the store (about 2 GB in ten
 * minutes at 250 requests a second, found 2026-11-29). Each address may begin `perAddress`
 * sign-ins per window (addressBudget). A browser begins a few; a shared NAT, some hundreds.
 * Requests that begin none (a code at once, an error to the redirect URI) are not counted.
 */
export function signInBudget(limits: SignInLimits): ArbiterMiddleware {
  return addressBudget(limits, 'sign-ins', { made: beganSignIn });
}

/** The answer sends the browser to an interaction (its sign-in page): oidc-provider stored one. */
function beganSignIn(ctx: ArbiterContext): boolean {
  if (ctx.status !== 302 && ctx.status !== 303) return false;
  const location = ctx.response.get('Location');
  return location !== '' && new URL(location, 'http://base.invalid').pathname.includes(`${INTERACTION_PATH}/`);
}
