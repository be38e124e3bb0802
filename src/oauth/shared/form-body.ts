import { parse } from 'node:querystring';
import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';
import { escapesNul, hasEncodedNul, MAX_JSON_DEPTH, nestingExceeds, readText, refuseNul } from '../../http/body.js';
import { HttpError } from '../../http/errors.js';
import { assertSingleValued } from '../../http/parameters.js';

/** Parameters whose value is JSON (RFC 9396 details, OIDC claims requests, the introspection context). */
const JSON_PARAMETERS: Record<string, string> = {
  authorization_details: 'invalid_authorization_details',
  claims: 'invalid_request',
  context: 'invalid_request',
};

/**
 * Reads the urlencoded form of the oidc-provider endpoints that take one (/token, /introspect,
 * POST /authorize, /userinfo: the route table in edge.ts) once, with the size limit, so that
 * Arbiter's own checks and the audit log see the parameters. oidc-provider's own reader stops at
 * 56 KiB in the middle of the body and leaves the rest unread on a kept-alive connection (the
 * client's next request on it fails); it takes the already-read body from `ctx.request.body`
 * instead. A parameter given twice is refused here, naming it, unless it is `repeatable` at
 * this endpoint (RFC 8707's `resource` at /authorize and /token), and so are a U+0000 in a
 * name or value (refuseNul) and a JSON-valued parameter nested deeper than MAX_JSON_DEPTH or
 * escaping U+0000 (`\u0000`).
 */
export function formBody(maxBodyBytes: number, repeatable: readonly string[] = []) {
  return async function form(ctx: ArbiterContext, next: Next): Promise<void> {
    if (ctx.method === 'POST' && ctx.is('application/x-www-form-urlencoded')) {
      const raw = await readText(ctx, maxBodyBytes);
      assertSingleValued(raw, 'parameter', repeatable);
      const body = parse(raw);
      // Only a raw U+0000 or "%00" decodes to one: the walk that names the field runs only then.
      if (hasEncodedNul(raw)) refuseNul(body, 'the request body');
      (ctx.request as unknown as { body: string }).body = raw;
      ctx.state.body = body;
      assertShallowJson(ctx.state.body);
    }
    await next();
  };
}

/** A parsed form parameter, or undefined when absent. */
export function formParameter(ctx: ArbiterContext, name: string): string | undefined {
  const value = ctx.state.body?.[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Refuses a JSON-valued parameter nested deeper than MAX_JSON_DEPTH, or holding an escaped U+0000
 * (kept with the code or token it leads to), also those of a request object: authorize/request-object.ts.
 */
export function assertShallowJson(parameters: Record<string, unknown>): void {
  for (const [name, error] of Object.entries(JSON_PARAMETERS)) {
    const value = parameters[name];
    if (typeof value !== 'string') continue;
    if (nestingExceeds(value, MAX_JSON_DEPTH))
      throw new HttpError(400, error, `${name} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
    if (escapesNul(value)) throw new HttpError(400, error, `${name} escapes U+0000 (a NUL character)`);
  }
}
