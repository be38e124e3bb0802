import type { Filter, StoredDoc, TenantCollection } from './types.js';

/**
 * The next page of `filter`'s documents by ascending id, strictly after `after` (from `floor`, the
 * least id, on the first page). A strict bound, where `startAt` with `skip: 1` assumed the last
 * document of the previous page was still there: one gone since (deleted, or expired and so
 * hidden) made the page begin one further, leaving a document unread (found 2026-11-29: a
 * session's clients not told of its logout). Ids are unique, so the bound is left out by its id.
 */
export async function pageAfter<T extends StoredDoc>(
  collection: TenantCollection<T>,
  filter: Filter,
  after: T['id'] | undefined,
  floor: string | number,
  limit: number,
): Promise<T[]> {
  const page = await collection.find(filter, {
    sort: { field: 'id', direction: 'asc' },
    startAt: after ?? floor,
    limit: limit + 1,
  });
  return page.filter((doc) => doc.id !== after).slice(0, limit);
}

/** Every page of `filter`'s documents by ascending id (pageAfter), `limit` at a time, none empty. */
export async function* pagesByKey<T extends StoredDoc>(
  collection: TenantCollection<T>,
  filter: Filter,
  floor: string | number,
  limit: number,
): AsyncGenerator<T[]> {
  let after: T['id'] | undefined;
  for (;;) {
    const page = await pageAfter(collection, filter, after, floor, limit);
    if (page.length) yield page;
    if (page.length < limit) return;
    after = page.at(-1)!.id;
  }
}
