import type { Context } from 'koa';
import { basicCredentials } from './basic.js';
import { hasEncodedNul, nulRefused, refuseNul } from './body.js';
import { HttpError, shownName } from './errors.js';

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
      const shown = shownName(name);
      throw new HttpError(400, 'invalid_request', `${what} '${shown}' was given more than once`, { parameter: shown });
    }
    seen.add(name);
  }
}

/**
 * Every request: a U+0000 in its path, its query (names and values) or the client id or secret
 * of a Basic Authorization header is a 400 before anything reads or stores them (see refuseNul;
 * bodies are checked as they are read). Node's HTTP parser already refuses it raw in a header.
 */
export function refuseNulInUrl(ctx: Context): void {
  if (hasEncodedNul(ctx.path)) throw nulRefused('the path');
  if (hasEncodedNul(ctx.querystring)) throw nulRefused('the query string');
  refuseNul(basicCredentials(ctx.get('authorization')), 'the Basic credentials');
}
