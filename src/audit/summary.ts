import type { Context } from 'koa';

/**
 * Facts about a request that are safe to keep: which credentials were presented and how,
 * which parameters were sent — never their values when they could be secrets.
 */
export function summarizeRequest(ctx: Context): Record<string, unknown> {
  const authorization = ctx.get('authorization');
  const scheme = authorization.split(' ')[0]?.toLowerCase() || null;
  const params = { ...(ctx.query as Record<string, unknown>), ...bodyParams(ctx) };
  const summary: Record<string, unknown> = {
    authType: scheme,
    hasToken: scheme === 'bearer' || scheme === 'dpop' || 'token' in params,
    hasDpopProof: ctx.get('dpop') !== '',
    hasClientAssertion: 'client_assertion' in params,
    hasClientSecret: 'client_secret' in params || scheme === 'basic',
    adminKeyPresented: ctx.get('x-admin-api-key') !== '',
    parameterNames: firstOf(Object.keys(params).sort()),
  };
  for (const name of SAFE_VALUES) {
    const value = params[name];
    if (typeof value === 'string') summary[name] = clipped(value);
    // A repeated parameter (RFC 8707's `resource`) is kept as the list of its values.
    else if (Array.isArray(value) && value.every((item) => typeof item === 'string'))
      summary[name] = firstOf(value.map(clipped));
  }
  return summary;
}

/**
 * What any caller's summary keeps, authenticated or not (bounds.ts cuts an unauthenticated one
 * further): found 2026-11-30, a read-only Admin key's refused POST of 40,000 body fields was
 * kept as a 640 KB entry, as often as the key cared to send it.
 */
const MAX_NAMES_KEPT = 100;
const MAX_VALUE_KEPT = 4096;

function firstOf(items: string[]): string[] {
  return items.length > MAX_NAMES_KEPT
    ? [...items.slice(0, MAX_NAMES_KEPT), `… ${items.length - MAX_NAMES_KEPT} more`]
    : items;
}

function clipped(value: string): string {
  return value.length > MAX_VALUE_KEPT ? `${value.slice(0, MAX_VALUE_KEPT)}…` : value;
}

/** Parameters whose values carry no secret and are worth seeing in an audit entry. */
const SAFE_VALUES = [
  'grant_type',
  'response_type',
  'scope',
  'client_id',
  'resource',
  'token_type_hint',
  'prompt',
  'redirect_uri',
];

export function bodyParams(ctx: Context): Record<string, unknown> {
  // oidc-provider keeps the parsed form in ctx.oidc.body; our routers keep theirs in ctx.state.body.
  const body = (ctx as unknown as { oidc?: { body?: unknown } }).oidc?.body ?? ctx.state.body;
  return body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
}
