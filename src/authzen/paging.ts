import { createHash } from 'node:crypto';
import { badRequest } from '../http/errors.js';

/** Results per page when the request names no limit. */
export const DEFAULT_PAGE_LIMIT = 100;

export interface PageRequest {
  token?: string;
  limit?: number;
}

/**
 * AuthZEN 1.0 §8.2 paging over a computed result list. The opaque token holds the next offset
 * and a digest of the request, so that a token replayed with other criteria is refused (the
 * spec: "PDPs SHOULD return an error when any entity or parameter has been changed").
 */
export function pageOf<T>(
  results: T[],
  page: PageRequest | undefined,
  criteria: unknown,
): { page: { next_token: string; count: number; total: number }; results: T[] } {
  const limit = page?.limit ?? DEFAULT_PAGE_LIMIT;
  const fingerprint = createHash('sha256')
    .update(JSON.stringify([criteria, limit]))
    .digest('base64url')
    .slice(0, 16);
  const offset = page?.token ? offsetOf(page.token, fingerprint) : 0;
  const slice = results.slice(offset, offset + limit);
  const next = offset + slice.length;
  const more = limit > 0 && next < results.length;
  return {
    page: {
      next_token: more ? Buffer.from(JSON.stringify({ o: next, f: fingerprint })).toString('base64url') : '',
      count: slice.length,
      total: results.length,
    },
    results: slice,
  };
}

function offsetOf(token: string, fingerprint: string): number {
  let decoded: { o?: unknown; f?: unknown };
  try {
    decoded = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { o?: unknown; f?: unknown };
  } catch {
    throw badRequest('page.token is not a token this server issued', { field: 'page.token' });
  }
  if (typeof decoded?.o !== 'number' || !Number.isInteger(decoded.o) || decoded.o < 0 || typeof decoded.f !== 'string')
    throw badRequest('page.token is not a token this server issued', { field: 'page.token' });
  if (decoded.f !== fingerprint)
    throw badRequest(
      'page.token belongs to a search with other criteria or another limit; repeat the request that produced it',
      { field: 'page.token' },
    );
  return decoded.o;
}
