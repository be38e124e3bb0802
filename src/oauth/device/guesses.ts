import type { Next } from 'koa';
import type { AuthFailureLimits } from '../../http/auth-failures.js';
import { limitedAddress } from '../../http/forwarded.js';
import type { Store } from '../../store/index.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';
import { rejectedUserCodes, tooManyGuessesPage } from './pages.js';

/**
 * RFC 8628 §5.1: a user code is short (8 characters of 20: about 34 bits), so guessing one must
 * be slow. Each unknown code entered at the verification page counts against the address in the
 * store (every node and worker together), with the credential failure limit's numbers
 * (AUTH_FAILURE_LIMIT per AUTH_FAILURE_WINDOW_SECONDS); past that the address gets a 429 page
 * until its window ends, without any code looked up. Per address, not per tenant or code: a
 * guesser cannot lock out the people entering their own codes elsewhere.
 */
export function userCodeGuessLimit({ limit, windowSeconds }: AuthFailureLimits, store: Store): ArbiterMiddleware {
  const windowMs = windowSeconds * 1000;
  return async function userCodeGuesses(ctx: ArbiterContext, next: Next): Promise<void> {
    if (ctx.method !== 'POST') return next();
    const key = `device-user-code-guesses ${limitedAddress(ctx.ip)}`;
    // Counted before the code is looked up, given back when it was no wrong code: counted after,
    // guesses sent at once all passed the check before any counted (found 2026-11-30).
    const counted = await store.addToWindow(key, windowMs);
    if (counted.count > limit)
      return tooManyGuessesPage(ctx, Math.max(1, Math.ceil((counted.resetAt - Date.now()) / 1000)));
    try {
      await next();
    } finally {
      // A request that failed otherwise (the store, say) was no wrong code either; giving back must not hide
      // why it failed. Within the window it was counted in only: in a new one it would start below zero.
      if (!rejectedUserCodes.has(ctx) && Date.now() < counted.resetAt)
        await store.addToWindow(key, windowMs, -1).catch(() => undefined);
    }
  };
}
