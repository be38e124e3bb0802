import type { Context } from 'koa';
import { HttpError, badRequest } from './errors.js';

/** Reads a JSON request body with a size limit; malformed JSON or a wrong media type is a 4xx, never a 500. */
export async function readJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  if (!ctx.is('application/json', 'application/*+json')) {
    throw new HttpError(415, 'invalid_request', 'the request body must be application/json');
  }
  const text = await readText(ctx, limitBytes);
  try {
    return JSON.parse(text);
  } catch {
    throw badRequest('the request body is not valid JSON');
  }
}

/** Reads the raw body as UTF-8 text, refusing more than `limitBytes` with a 413. */
export async function readText(ctx: Context, limitBytes: number): Promise<string> {
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > limitBytes) throw tooLarge(limitBytes);
  const chunks: Buffer[] = [];
  let received = 0;
  for await (const chunk of ctx.req) {
    received += (chunk as Buffer).length;
    if (received > limitBytes) throw tooLarge(limitBytes);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function tooLarge(limitBytes: number): HttpError {
  return new HttpError(413, 'invalid_request', `the request body exceeds ${limitBytes} bytes`);
}
