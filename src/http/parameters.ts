import type { Context, Next } from 'koa';
import { HttpError } from './errors.js';

/**
 * Arbiter's protocol and Admin parameters are single-valued: a name given twice is refused up
 * front, naming it, instead of reaching code that expects one string. `raw` is a query string
 * or an urlencoded form body; `repeatable` names the parameters a protocol lets repeat there
 * (RFC 8707 §2: `resource` at /authorize and /token), whose code reads them as a list.
 */
export function assertSingleValued(raw: string, what = 'parameter', repeatable: readonly string[] = []): void {
  if (!raw) return;
  const seen = new Set<string>();
  for (const name of new URLSearchParams(raw).keys()) {
    if (seen.has(name) && !repeatable.includes(name)) {
      const shown = name.length > 64 ? `${name.slice(0, 64)}…` : name;
      throw new HttpError(400, 'invalid_request', `${what} '${shown}' was given more than once`, { parameter: shown });
    }
    seen.add(name);
  }
}

/**
 * Every query string of the endpoints it is mounted in front of. `repeatableAt` maps a path to
 * the parameters that may repeat in its query (and nowhere else).
 */
export function singleValuedQuery(repeatableAt: Readonly<Record<string, readonly string[]>> = {}) {
  return async (ctx: Context, next: Next): Promise<void> => {
    assertSingleValued(
      ctx.querystring,
      'query parameter',
      Object.hasOwn(repeatableAt, ctx.path) ? repeatableAt[ctx.path] : [],
    );
    await next();
  };
}
