import { resolve } from 'node:path';
import { MongoStore } from '../../adapters/mongodb/index.js';
import { PostgresStore } from '../../adapters/postgresql/index.js';
import { SqliteStore } from '../../adapters/sqlite/index.js';
import type { CollectionSpec, Store } from './types.js';

// Static imports on purpose: a dynamic import() can load a second copy of the store
// module (and of ConflictError) when a caller was itself loaded through CommonJS.
// Only the composition root imports this module (src/collections.ts): the store interface
// (./index.js) knows no implementation.

/**
 * Opens the store named by a STORE_URL: `sqlite:<file>`, `sqlite::memory:`, `postgres://…`
 * (`postgresql://…`) or `mongodb://…`. `collections` are prepared at once where the store can
 * (PostgreSQL creates their tables, MongoDB their indexes); any
 * other collection, and every one on SQLite, is prepared on first use. A SQLite file's directory
 * must exist unless `createDirectory`; a SQLite write waits `sqliteLockWaitMs` for another
 * connection's write lock (5 s by default).
 */
export async function openStore(
  url: string,
  collections: readonly CollectionSpec[] = [],
  { createDirectory, sqliteLockWaitMs }: { createDirectory?: boolean; sqliteLockWaitMs?: number } = {},
): Promise<Store> {
  if (url.startsWith('sqlite:'))
    return SqliteStore.open(url.slice('sqlite:'.length), { createDirectory, lockWaitMs: sqliteLockWaitMs });
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return PostgresStore.open(url, collections);
  if (url.startsWith('mongodb://') || url.startsWith('mongodb+srv://')) return MongoStore.open(url, collections);
  throw new Error(
    `STORE_URL must start with sqlite:, postgres:// or mongodb://, got ${JSON.stringify(url.split(':')[0])}`,
  );
}

/**
 * Replaces the contents of the SQLite or PostgreSQL store a STORE_URL names with a backup file's
 * (see SqliteStore.restore, PostgresStore.restore); returns the store's file, or the URL without
 * its credentials. MongoDB stores are restored with mongorestore.
 */
export async function restoreStore(url: string, backupFile: string): Promise<string> {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    await PostgresStore.restore(url, backupFile);
    return url.replace(/\/\/[^@/]*@/, '//');
  }
  const location = url.startsWith('sqlite:') ? url.slice('sqlite:'.length) : '';
  if (!location || location === ':memory:')
    throw new Error(
      'restore needs STORE_URL=sqlite:<file> or postgres://…; restore a MongoDB store with mongorestore (docs/operations.md, Backups)',
    );
  const target = resolve(location);
  await SqliteStore.restore(backupFile, target);
  return target;
}

/**
 * One document of a backup file for the store a STORE_URL names, read without restoring anything
 * (a restore checks what it would bring before it replaces the store); null when absent.
 */
export async function documentInBackup(
  url: string,
  backupFile: string,
  at: { collection: string; tenant: string; id: string },
): Promise<unknown> {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://'))
    return PostgresStore.documentInBackup(backupFile, at.collection, at.tenant, at.id);
  return SqliteStore.documentInBackup(backupFile, at.collection, at.tenant, at.id);
}
