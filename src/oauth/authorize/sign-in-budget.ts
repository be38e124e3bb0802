import type { Next } from 'koa';
import { LRUCache } from 'lru-cache';
import { HttpError } from '../../http/errors.js';
import { limitedAddress } from '../../http/forwarded.js';
import { INTERACTION_PATH } from '../interactions/slice.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';

export interface SignInLimits {
  /** Sign-ins one address may begin per window (SIGN_INS_PER_ADDRESS). */
  perAddress: number;
  windowSeconds: number;
}

/** Addresses followed at once: the least recently seen is forgotten first (its count with it). */
const MAX_ADDRESSES = 10_000;

/**
 * An authorization request that needs the user sends the browser to sign in, and oidc-provider
 * stores its interaction (about 12 KB with its session) until it ends or expires: anyone may do
 * that with a public client's client_id, so one address could fill the store (about 2 GB in ten
 * minutes at 250 requests a second, found 2026-11-29). Each address (an IPv6 /64) may begin
 * `perAddress` sign-ins per window in this process; past that it is answered 429 with
 * Retry-After, before anything is stored. A browser begins a few; a shared NAT, some hundreds.
 * Requests that begin none (a code at once, an error to the redirect URI) are not counted.
 */
export function signInBudget({ perAddress, windowSeconds }: SignInLimits): ArbiterMiddleware {
  const windowMs = windowSeconds * 1000;
  const windows = new LRUCache<string, { start: number; count: number }>({ max: MAX_ADDRESSES });
  return async function signIns(ctx: ArbiterContext, next: Next): Promise<void> {
    const address = limitedAddress(ctx.ip);
    const now = Date.now();
    const current = windows.get(address);
    const window = current && now - current.start < windowMs ? current : { start: now, count: 0 };
    if (window.count >= perAddress) {
      const retryAfter = Math.max(1, Math.ceil((window.start + windowMs - now) / 1000));
      ctx.set('Retry-After', String(retryAfter));
      throw new HttpError(
        429,
        'too_many_requests',
        `this address began ${perAddress} sign-ins within ${windowSeconds} seconds; retry after ${retryAfter} seconds`,
      );
    }
    await next();
    if (!beganSignIn(ctx)) return;
    window.count += 1;
    windows.set(address, window);
  };
}

/** The answer sends the browser to an interaction (its sign-in page): oidc-provider stored one. */
function beganSignIn(ctx: ArbiterContext): boolean {
  if (ctx.status !== 302 && ctx.status !== 303) return false;
  const location = ctx.response.get('Location');
  return location !== '' && new URL(location, 'http://base.invalid').pathname.includes(`${INTERACTION_PATH}/`);
}
