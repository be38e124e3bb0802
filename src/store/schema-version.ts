import { ConflictError, DEFAULT_TENANT, type Store, type StoredDoc } from './types.js';

/** Where a store says which layout of Arbiter's records it holds: one document, in every store alike. */
export const SCHEMA_COLLECTION = { name: 'schema' };
const VERSION_ID = 'version';

interface VersionDoc extends StoredDoc {
  id: string;
  version: number;
  updatedAt: string;
}

/** One step from version `to - 1` to `to`; run once per store, and safe to run again if a start was cut off. */
export interface Migration {
  to: number;
  description: string;
  run(store: Store): Promise<void>;
}

export class SchemaVersionError extends Error {}

/** Where the version document lives, for a reader of a backup file (`arbiter restore`). */
export const SCHEMA_VERSION_DOCUMENT = { collection: SCHEMA_COLLECTION.name, tenant: DEFAULT_TENANT, id: VERSION_ID };

/** The version a schema document (null: none) says; 0 for a store written before versions existed. */
export function versionOf(doc: unknown): number {
  const version = (doc as Partial<VersionDoc> | null)?.version;
  return typeof version === 'number' ? version : 0;
}

/** The store's schema version; 0 for a store written before versions existed (or a new one). */
export async function schemaVersion(store: Store): Promise<number> {
  return versionOf(await store.collection<VersionDoc>(SCHEMA_COLLECTION, DEFAULT_TENANT).get(VERSION_ID));
}

/**
 * Brings the store to the newest version `migrations` reach, one step at a time: each step runs,
 * then the version moves on only if no other node moved it meanwhile (a conditional update), so
 * nodes starting together each run a step at most once more (steps are idempotent). A store of a
 * newer version than this Arbiter knows is refused: an older release must not write records
 * whose layout it does not know. Returns the versions before and after.
 */
export async function migrate(store: Store, migrations: readonly Migration[]): Promise<{ from: number; to: number }> {
  const latest = migrations.reduce((highest, step) => Math.max(highest, step.to), 0);
  const from = await schemaVersion(store);
  if (from > latest)
    throw new SchemaVersionError(
      `the store holds schema version ${from}, newer than this Arbiter's ${latest}: run the release that wrote it, or restore a backup`,
    );
  const versions = store.collection<VersionDoc>(SCHEMA_COLLECTION, DEFAULT_TENANT);
  let current = from;
  for (const step of [...migrations].sort((a, b) => a.to - b.to).filter((step) => step.to > from)) {
    await step.run(store);
    const updatedAt = new Date().toISOString();
    if (current === 0) {
      await versions.insert({ id: VERSION_ID, version: step.to, updatedAt }).catch((error: unknown) => {
        if (!(error instanceof ConflictError)) throw error;
      });
    } else {
      await versions.update(VERSION_ID, { version: step.to, updatedAt }, { version: current });
    }
    current = await schemaVersion(store);
  }
  return { from, to: current };
}
