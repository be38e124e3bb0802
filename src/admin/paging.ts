import type { Context } from 'koa';
import { badRequest } from '../http/errors.js';

/** At most this many records a list answers (a page; the `Link` header names the next). */
export const MAX_LIST_LIMIT = 1000;

/** `offset` and `limit` of a list request: whole numbers, limit 1 to MAX_LIST_LIMIT (400 otherwise). */
export function listPage(ctx: Context): { offset: number; limit: number } {
  const number = (name: string, fallback: number, min: number, max: number): number => {
    const raw = ctx.query[name];
    if (raw === undefined) return fallback;
    if (typeof raw !== 'string' || !/^\d{1,7}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw badRequest(`${name} must be a whole number from ${min} to ${max}`, { field: name });
    }
    return Number(raw);
  };
  return { offset: number('offset', 0, 0, 9_999_999), limit: number('limit', MAX_LIST_LIMIT, 1, MAX_LIST_LIMIT) };
}

export function nextPageQuery(ctx: Context, offset: number, limit: number): string {
  const query = new URLSearchParams(ctx.querystring);
  query.set('offset', String(offset));
  query.set('limit', String(limit));
  return query.toString();
}
