import { MongoStore } from '../../adapters/mongodb/index.js';
import { SqliteStore } from '../../adapters/sqlite/index.js';
import { knownCollections } from './collections.js';
import type { Store } from './types.js';

// Static imports on purpose: a dynamic import() can load a second copy of the store
// module (and of ConflictError) when a caller was itself loaded through CommonJS.

/** Opens the store named by a STORE_URL: `sqlite:<file>`, `sqlite::memory:` or `mongodb://…`. */
export async function openStore(url: string): Promise<Store> {
  if (url.startsWith('sqlite:')) return SqliteStore.open(url.slice('sqlite:'.length));
  if (url.startsWith('mongodb://') || url.startsWith('mongodb+srv://')) return MongoStore.open(url, knownCollections());
  throw new Error(`STORE_URL must start with sqlite: or mongodb://, got ${JSON.stringify(url.split(':')[0])}`);
}
