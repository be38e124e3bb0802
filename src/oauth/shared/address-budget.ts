import type { Next } from 'koa';
import { LRUCache } from 'lru-cache';
import { HttpError } from '../../http/errors.js';
import { limitedAddress } from '../../http/forwarded.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';

export interface AddressLimits {
  /** Requests that store something one address may make per window (SIGN_INS_PER_ADDRESS). */
  perAddress: number;
  windowSeconds: number;
}

/** Addresses followed at once: the least recently seen is forgotten first (its count with it). */
const MAX_ADDRESSES = 10_000;

/**
 * What anyone may make the store keep for a while with a public client's client_id alone (a
 * sign-in under way, a device code, a pushed request) is counted per address (an IPv6 /64), in
 * this process: one address may make `perAddress` of them per window; past that it is answered
 * 429 with Retry-After, before anything is read or stored. Only requests `applies` to are counted
 * (by default all); `made` says, once the request is answered, whether it stored one; `what` names
 * them in the refusal. A request holds its place while under way, so that requests at once cannot
 * all pass the check (found 2026-11-29: 30 at once with a budget of 3 stored 4).
 */
export function addressBudget(
  { perAddress, windowSeconds }: AddressLimits,
  what: string,
  {
    made,
    applies = () => true,
  }: { made: (ctx: ArbiterContext) => boolean; applies?: (ctx: ArbiterContext) => boolean },
): ArbiterMiddleware {
  const windowMs = windowSeconds * 1000;
  const windows = new LRUCache<string, { start: number; count: number }>({ max: MAX_ADDRESSES });
  return async function withinBudget(ctx: ArbiterContext, next: Next): Promise<void> {
    if (!applies(ctx)) return next();
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
        `this address made ${perAddress} ${what} within ${windowSeconds} seconds; retry after ${retryAfter} seconds`,
      );
    }
    window.count += 1;
    windows.set(address, window);
    let stored = false;
    try {
      await next();
      stored = made(ctx);
    } finally {
      if (!stored) window.count -= 1;
    }
  };
}
