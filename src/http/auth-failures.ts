import type { Context, Next } from 'koa';
import { RateLimiterMemory } from 'rate-limiter-flexible';

export interface AuthFailureLimits {
  /** Failures one address may make per window; the next request is answered 429. */
  limit: number;
  windowSeconds: number;
}

/**
 * Slows down credential guessing: every 401 answered to an address (a wrong Admin API key,
 * client secret or client assertion, a bad Bearer token) counts against it, and once it has
 * used up its failures for the window, every request from it is answered 429 with Retry-After
 * until the window ends. Other addresses are unaffected. Mount outside the JSON error handler,
 * so that it sees the status the caller got.
 */
export function authFailureLimit({ limit, windowSeconds }: AuthFailureLimits) {
  const failures = new RateLimiterMemory({ points: limit, duration: windowSeconds });
  return async (ctx: Context, next: Next): Promise<void> => {
    const address = ctx.ip;
    const used = await failures.get(address);
    if (used && used.consumedPoints >= limit) {
      const retryAfter = Math.max(1, Math.ceil(used.msBeforeNext / 1000));
      ctx.status = 429;
      ctx.set('Retry-After', String(retryAfter));
      ctx.body = { error: 'too_many_requests', error_description: `too many failed authentications from this address; retry after ${retryAfter} seconds` };
      return;
    }
    try {
      await next();
    } finally {
      if (ctx.status === 401) await failures.penalty(address, 1).catch(() => undefined);
    }
  };
}
