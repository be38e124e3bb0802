import { MongoStore } from '../../adapters/mongodb/index.js';
import { SqliteStore } from '../../adapters/sqlite/index.js';
import type { CollectionSpec, Store } from './types.js';

// Static imports on purpose: a dynamic import() can load a second copy of the store
// module (and of ConflictError) when a caller was itself loaded through CommonJS.
// Only the composition root imports this module (src/collections.ts): the store interface
// (./index.js) knows no implementation.

/**
 * Opens the store named by a STORE_URL: `sqlite:<file>`, `sqlite::memory:` or `mongodb://…`.
 * `collections` are prepared at once where the store can (MongoDB creates their indexes); any
 * other collection, and every one on SQLite, is prepared on first use. A SQLite file's directory
 * must exist unless `createDirectory`.
 */
export async function openStore(
  url: string,
  collections: readonly CollectionSpec[] = [],
  options: { createDirectory?: boolean } = {},
): Promise<Store> {
  if (url.startsWith('sqlite:')) return SqliteStore.open(url.slice('sqlite:'.length), options);
  if (url.startsWith('mongodb://') || url.startsWith('mongodb+srv://')) return MongoStore.open(url, collections);
  throw new Error(`STORE_URL must start with sqlite: or mongodb://, got ${JSON.stringify(url.split(':')[0])}`);
}
