import { randomUUID } from 'node:crypto';
import type { ParameterizedContext } from 'koa';
import type { RequestState } from './state.js';

/** What a caller's X-Request-ID may be to be kept: visible ASCII, at most 128 characters. */
const CALLER_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Every request has an id: the caller's X-Request-ID when it is a sensible one (AuthZEN 1.0
 * §12.1.4 asks for it back), else a fresh UUID. It is answered in X-Request-ID, carried by every
 * log line written while the request is answered (requestFrame) and kept in its audit entry, so
 * the three can be matched up.
 */
export function assignRequestId(ctx: ParameterizedContext<RequestState>): string {
  const given = ctx.get('x-request-id');
  const id = CALLER_ID.test(given) ? given : randomUUID();
  ctx.state.requestId = id;
  ctx.set('X-Request-ID', id);
  return id;
}
