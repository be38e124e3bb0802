import type { Context, Next } from 'koa';
import { HttpError } from './errors.js';

/**
 * Arbiter's protocol and Admin parameters are single-valued (one `resource` per request
 * included): a name given twice is refused up front, naming it, instead of reaching code
 * that expects one string. `raw` is a query string or an urlencoded form body.
 */
export function assertSingleValued(raw: string, what = 'parameter'): void {
  if (!raw) return;
  const seen = new Set<string>();
  for (const name of new URLSearchParams(raw).keys()) {
    if (seen.has(name)) {
      const shown = name.length > 64 ? `${name.slice(0, 64)}…` : name;
      throw new HttpError(400, 'invalid_request', `${what} '${shown}' was given more than once`, { parameter: shown });
    }
    seen.add(name);
  }
}

/** Every query string of the endpoints it is mounted in front of. */
export async function singleValuedQuery(ctx: Context, next: Next): Promise<void> {
  assertSingleValued(ctx.querystring, 'query parameter');
  await next();
}
