import type { Context } from 'koa';
import { HttpError } from './errors.js';

/** RFC 7617: `Authorization: Basic <base64>`. */
const BASIC = /^Basic +([A-Za-z0-9+/]+=*) *$/i;

/**
 * The client credentials of a Basic Authorization header (RFC 6749 §2.3.1: id and secret each
 * form-encoded, then joined by ":" and base64-encoded); undefined when the header is not Basic.
 * A part that is missing or does not decode is null.
 */
export function basicCredentials(authorization: string): { id: string | null; secret: string | null } | undefined {
  const match = BASIC.exec(authorization);
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const separator = decoded.indexOf(':');
  if (separator < 0) return { id: null, secret: null };
  return { id: formDecoded(decoded.slice(0, separator)), secret: formDecoded(decoded.slice(separator + 1)) };
}

function formDecoded(value: string): string | null {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/** Refused client credentials: 401 invalid_client with a Basic challenge (RFC 6749 §5.2). */
export function invalidClient(ctx: Context, description = 'client authentication failed'): HttpError {
  ctx.set('WWW-Authenticate', 'Basic realm="arbiter", charset="UTF-8"');
  return new HttpError(401, 'invalid_client', description);
}
