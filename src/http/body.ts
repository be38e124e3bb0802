import type { Context } from 'koa';
import { HttpError, badRequest, shownName } from './errors.js';

/**
 * The deepest nesting of arrays and objects accepted in a JSON body or a JSON-valued parameter.
 * Deeper documents reach nothing useful and break what they pass through: SQLite's JSON
 * functions stop at 1000 levels (the write of a token or an audit entry fails), and the
 * policy engine cannot decode its input.
 */
export const MAX_JSON_DEPTH = 32;

/** Reads a JSON request body with a size limit; malformed JSON or a wrong media type is a 4xx, never a 500. */
export async function readJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  if (!ctx.is('application/json', 'application/*+json')) {
    // The body is never read: the connection is not kept for another request behind it.
    if (hasBody(ctx)) ctx.set('Connection', 'close');
    throw new HttpError(415, 'invalid_request', 'the request body must be application/json');
  }
  const text = await readText(ctx, limitBytes);
  if (nestingExceeds(text, MAX_JSON_DEPTH))
    throw badRequest(`the request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest('the request body is not valid JSON');
  }
  refuseNul(parsed, 'the request body');
  return parsed;
}

/** A JSON body that may be left out: none (no Content-Type, no length) reads as `{}`; one given is read as readJsonBody reads it. */
export async function readOptionalJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  return ctx.get('content-type') === '' && !hasBody(ctx) ? {} : readJsonBody(ctx, limitBytes);
}

/** U+0000: what no text Arbiter keeps may hold (PostgreSQL refuses it in text and jsonb, SQLSTATE 22P05). */
const NUL = '\u0000';

/**
 * Refuses a U+0000 in any string or key of a parsed request (a JSON body, a form, a query), at any
 * depth, with a 400 that names the field (its dotted path, as schema refusals do): no store takes
 * it alike (FerretDB over PostgreSQL answered 500), and no identifier, URI or scope needs it.
 * Checked as each kind of input is parsed at the edge (readJsonBody, formBody, refuseNulInUrl),
 * before anything reads or stores it.
 */
export function refuseNul(value: unknown, where: string, path: string[] = []): void {
  if (typeof value === 'string') {
    if (value.includes(NUL)) throw nulRefused(where, path);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  for (const [key, item] of Object.entries(value)) {
    const at = [...path, key];
    if (key.includes(NUL)) throw nulRefused(where, at);
    refuseNul(item, where, at);
  }
}

/** U+0000 escaped in JSON text (`\u0000`), its backslash not itself escaped (`\\u0000` is a backslash and "u0000"). */
export const ESCAPED_NUL = /(?<!\\)((?:\\\\)*)\\u0000/g;

/** True when JSON text (a JSON-valued parameter, say) escapes U+0000 in a string. */
export function escapesNul(jsonText: string): boolean {
  return jsonText.search(ESCAPED_NUL) >= 0;
}

/** True when `text` holds U+0000, as itself or percent-encoded (a path, a query string, a form: "%00" always decodes to it). */
export function hasEncodedNul(text: string): boolean {
  return text.includes(NUL) || text.includes('%00');
}

export function nulRefused(where: string, path: string[] = []): HttpError {
  // A field of the empty name ("" as a JSON key) is still a field: it is named, as `""` in words.
  if (path.length === 0) return badRequest(`${where} ${NUL_HELD}`);
  // Cut: found 2026-11-30, a 60,000-character name was echoed whole, twice, in the answer.
  const field = shownName(path.join('.'));
  return badRequest(`${field || '""'} in ${where} ${NUL_HELD}`, { field });
}

const NUL_HELD = 'contains U+0000 (a NUL character), which no parameter, field or name may hold';

/**
 * Reads the raw body as UTF-8 text, refusing more than `limitBytes` with a 413. A refused body
 * is left unread, so the answer closes the connection: a client must not send its next request
 * on a connection whose previous body the server did not read to the end.
 */
export async function readText(ctx: Context, limitBytes: number): Promise<string> {
  refuseEncodedBody(ctx);
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > limitBytes) throw tooLarge(ctx, limitBytes);
  const chunks: Buffer[] = [];
  let received = 0;
  try {
    for await (const chunk of ctx.req.iterator({ destroyOnReturn: false })) {
      received += (chunk as Buffer).length;
      if (received > limitBytes) throw tooLarge(ctx, limitBytes);
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    throw error instanceof HttpError ? error : notReceived(ctx);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The body stopped arriving: Node's request timeout (HTTP_REQUEST_TIMEOUT_MS) cut a body that
 * trickled in, and answered 408 itself; or the client went away. Either way a 4xx for the audit
 * log and the metrics, not a 500: nobody is left to read it.
 */
function notReceived(ctx: Context): HttpError {
  const timedOut = (ctx.req.socket.errored as NodeJS.ErrnoException | null)?.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  return timedOut
    ? new HttpError(408, 'invalid_request', 'the request body did not arrive within HTTP_REQUEST_TIMEOUT_MS')
    : badRequest('the request body ended before its announced length (the client went away)');
}

/**
 * True when `text`, read as JSON, opens more than `max` arrays or objects at once (brackets
 * inside strings do not count). A linear scan: deciding must not itself recurse.
 */
export function nestingExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (inString) {
      if (code === 0x5c) at++;
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) {
      inString = true;
    } else if (code === 0x5b || code === 0x7b) {
      if (++depth > max) return true;
    } else if (code === 0x5d || code === 0x7d) {
      depth--;
    }
  }
  return false;
}

function hasBody(ctx: Context): boolean {
  return Number(ctx.get('content-length') || 0) > 0 || ctx.get('transfer-encoding') !== '';
}

/**
 * A body sent compressed (Content-Encoding other than identity) is refused with 415, the encoding
 * Arbiter takes named (RFC 9110 §15.5.16): none is decompressed, so none can unpack into more than
 * the limit. Found 2026-11-30: such a body was read as its compressed bytes, and refused as a form
 * or JSON it was not, the bytes quoted back. Left unread, so the connection closes.
 */
function refuseEncodedBody(ctx: Context): void {
  const encoding = ctx.get('content-encoding').trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') return;
  ctx.set('Accept-Encoding', 'identity');
  ctx.set('Connection', 'close');
  throw new HttpError(
    415,
    'invalid_request',
    `the request body is sent with Content-Encoding ${shownName(encoding)}: send it uncompressed`,
  );
}

function tooLarge(ctx: Context, limitBytes: number): HttpError {
  ctx.set('Connection', 'close');
  return new HttpError(413, 'invalid_request', `the request body exceeds ${limitBytes} bytes`);
}
