import type { Context } from 'koa';

/**
 * Whether a cookie Arbiter sets (the upstream sign-in's browser binding, the console's) is
 * `Secure`: under an https issuer, on a request taken as https (src/http/forwarded.ts takes every
 * request as https unless a trusted proxy says it came over http). Found 2026-11-30: taken from
 * the issuer alone, it made Koa refuse the cookie on a request a trusted proxy said was http (a
 * 500 for the sign-in); a browser that spoke http would drop a Secure cookie anyway.
 */
export function secureCookie(ctx: Context, issuer: string): boolean {
  return ctx.secure && issuer.startsWith('https://');
}
