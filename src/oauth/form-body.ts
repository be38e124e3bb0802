import { parse } from 'node:querystring';
import type { Context, Next } from 'koa';
import { readText } from '../http/body.js';
import { assertSingleValued } from '../http/parameters.js';

const FORM_ENDPOINTS = new Set(['/token', '/introspect', '/authorize']);

/**
 * Reads the form body of /token, /introspect and POST /authorize once, with the size limit, so that Arbiter's
 * own checks and the audit log see the parameters. oidc-provider then takes the already-read
 * body from `ctx.request.body`. A parameter given twice is refused here, naming it.
 */
export function formBody(maxBodyBytes: number) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (ctx.method === 'POST' && FORM_ENDPOINTS.has(ctx.path) && ctx.is('application/x-www-form-urlencoded')) {
      const raw = await readText(ctx, maxBodyBytes);
      assertSingleValued(raw);
      (ctx.request as unknown as { body: string }).body = raw;
      ctx.state.body = parse(raw);
    }
    await next();
  };
}

/** A parsed form parameter, or undefined when absent. */
export function formParameter(ctx: Context, name: string): string | undefined {
  const value = (ctx.state.body as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : undefined;
}
