import { badRequest } from '../http/errors.js';
import type { TextSearch } from '../store/index.js';
import type { AdminContext } from './state.js';

/** At most this many records a list answers (a page; the `Link` header names the next). */
export const MAX_LIST_LIMIT = 1000;

/** The longest `q` a list takes: a search is a scan of the tenant's records, so its text is bounded. */
export const MAX_SEARCH_LENGTH = 200;

/** The header that tells how many records match the list's filters, across all pages. */
export const TOTAL_COUNT_HEADER = 'X-Total-Count';

/**
 * A list counts its matches up to this many (a count reads every match: a read-only key repeating
 * the list of 300,000 records held SQLite's thread 165 ms a time); past it, X-Total-Count says
 * this many and TOTAL_COUNT_CAPPED_HEADER says there are more.
 */
export const LIST_COUNT_CAP = 10_000;
/** What a list's count is given as its `atMost`: one past the cap, to know whether it was reached. */
export const LIST_COUNT_AT_MOST = LIST_COUNT_CAP + 1;
/** `true` when more records match than X-Total-Count says (LIST_COUNT_CAP). */
export const TOTAL_COUNT_CAPPED_HEADER = 'X-Total-Count-Capped';

/** `offset` and `limit` of a list request: whole numbers, limit 1 to MAX_LIST_LIMIT (400 otherwise). */
export function listPage(ctx: AdminContext): { offset: number; limit: number } {
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

/**
 * The list's `q`: a case-insensitive substring of one of `fields` (a collection's key and name
 * fields), every character taken as itself; absent or empty: no search. At most
 * MAX_SEARCH_LENGTH characters, no control characters (400 otherwise).
 */
export function listSearch(ctx: AdminContext, fields: string[]): TextSearch | undefined {
  const raw = ctx.query.q;
  if (raw === undefined || raw === '') return undefined;
  // eslint-disable-next-line no-control-regex
  if (typeof raw !== 'string' || raw.length > MAX_SEARCH_LENGTH || /[\u0000-\u001f\u007f]/.test(raw))
    throw badRequest(`q must be at most ${MAX_SEARCH_LENGTH} characters, without control characters`, { field: 'q' });
  return { fields, text: raw };
}

/**
 * A list's page (`read` is given limit + 1, one more than the page) and how many match, counted
 * (`count`) only when a next page exists: a page that ends the list holds the rest of it, so the
 * total is its offset plus what it holds. A search reads every record of the tenant, and list and
 * count read it twice (found 2026-11-29: the fifth of eight concurrent searches was refused 503).
 */
export async function pageAndTotal<T>(
  page: { offset: number; limit: number },
  read: (limit: number) => Promise<T[]>,
  count: () => Promise<number>,
): Promise<{ found: T[]; total: number }> {
  const found = await read(page.limit + 1);
  const ends = found.length <= page.limit && (found.length > 0 || page.offset === 0);
  return { found, total: ends ? page.offset + found.length : await count() };
}

/**
 * Answers one page of a list: `found` is what the store gave for `limit + 1` records (one more
 * than the page, to know whether a next page exists: then a `Link: rel="next"` header names it),
 * `total` how many match across all pages as counted with LIST_COUNT_AT_MOST (X-Total-Count, and
 * X-Total-Count-Capped past LIST_COUNT_CAP; null: not known, no header).
 */
export function answerPage<T>(
  ctx: AdminContext,
  page: { offset: number; limit: number },
  found: T[],
  total: number | null,
): T[] {
  if (found.length > page.limit)
    ctx.set(
      'Link',
      `<${ctx.originalUrl.split('?')[0]}?${nextPageQuery(ctx, page.offset + page.limit, page.limit)}>; rel="next"`,
    );
  if (total !== null) ctx.set(TOTAL_COUNT_HEADER, String(Math.min(total, LIST_COUNT_CAP)));
  if (total !== null && total > LIST_COUNT_CAP) ctx.set(TOTAL_COUNT_CAPPED_HEADER, 'true');
  return found.slice(0, page.limit);
}

function nextPageQuery(ctx: AdminContext, offset: number, limit: number): string {
  const query = new URLSearchParams(ctx.querystring);
  query.set('offset', String(offset));
  query.set('limit', String(limit));
  return query.toString();
}
