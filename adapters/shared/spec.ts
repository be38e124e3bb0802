/**
 * Semantics every store adapter shares: naming rules, how collection specs
 * combine, what a document's key and expiry are, and when a unique key applies.
 */
import type { CollectionSpec, Filter, FindOptions, StoredDoc, TextSearch } from '../../src/store/types.js';

const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Prefix of the table (SQLite) or collection (MongoDB) that holds a store collection. */
export const PHYSICAL_PREFIX = 'c_';

/** Collection and field names end up in SQL and in MongoDB index names: allow identifiers only. */
export function assertFieldName(name: string): void {
  if (!FIELD_NAME.test(name)) throw new Error(`invalid collection or field name: ${JSON.stringify(name)}`);
}

export function normalizeSpec(spec: CollectionSpec | string): CollectionSpec {
  const normalized = typeof spec === 'string' ? { name: spec } : spec;
  assertFieldName(normalized.name);
  for (const field of [...(normalized.uniqueKeys ?? []).flat(), ...(normalized.indexes ?? []).flat()])
    assertFieldName(field);
  return normalized;
}

/** The table/collection name of a store collection (validated, unquoted). */
export function physicalName(collection: string): string {
  assertFieldName(collection);
  return PHYSICAL_PREFIX + collection;
}

/**
 * The collections a store has seen declared. Components declare collections
 * independently (one by bare name, another with its unique keys), so a later
 * declaration adds to an earlier one instead of being ignored. The spec object
 * of a name keeps its identity, so collections handed out earlier also see
 * constraints declared later.
 */
export class DeclaredSpecs {
  private readonly specs = new Map<string, CollectionSpec>();

  /** Records a declaration; `grew` says whether it is new or added a unique key or index (time to create indexes). */
  declare(next: CollectionSpec): { spec: CollectionSpec; grew: boolean } {
    const known = this.specs.get(next.name);
    if (!known) {
      const spec = {
        name: next.name,
        uniqueKeys: [...(next.uniqueKeys ?? [])],
        indexes: [...(next.indexes ?? [])],
        ...(next.sparseIndexes ? { sparseIndexes: true } : {}),
      };
      this.specs.set(spec.name, spec);
      return { spec, grew: true };
    }
    const knownKeys = new Set((known.uniqueKeys ?? []).map(keyId));
    const addedKeys = (next.uniqueKeys ?? []).filter((key) => !knownKeys.has(keyId(key)));
    const knownIndexes = new Set((known.indexes ?? []).map(indexFields).map(keyId));
    const addedIndexes = (next.indexes ?? []).filter((index) => !knownIndexes.has(keyId(indexFields(index))));
    known.uniqueKeys = [...(known.uniqueKeys ?? []), ...addedKeys];
    known.indexes = [...(known.indexes ?? []), ...addedIndexes];
    // Sparse once any declaration says so (the component that owns the collection declares it).
    const madeSparse = next.sparseIndexes === true && known.sparseIndexes !== true;
    if (madeSparse) known.sparseIndexes = true;
    return { spec: known, grew: addedKeys.length + addedIndexes.length > 0 || madeSparse };
  }
}

/** The fields of an index of CollectionSpec.indexes: one, or a compound index's, in order. */
export function indexFields(index: string | string[]): string[] {
  return typeof index === 'string' ? [index] : index;
}

function keyId(key: string[]): string {
  return key.join('\u0000');
}

/** Every field that takes part in some unique key, once. */
export function uniqueKeyFields(spec: CollectionSpec): string[] {
  return [...new Set((spec.uniqueKeys ?? []).flat())];
}

/** Ids are compared as strings, so `1` and `"1"` name the same document (as a SQLite TEXT key would). */
export function idKey(id: string | number): string {
  return String(id);
}

/** A document's expiry instant (epoch ms), or null when it never expires. */
export function expiryOf(doc: { readonly [field: string]: unknown }): number | null {
  return typeof doc.expiresAt === 'number' ? doc.expiresAt : null;
}

/** A null or absent value exempts a document from a unique key (see CollectionSpec.uniqueKeys). */
export function isUnset(value: unknown): boolean {
  return value === null || value === undefined;
}

/**
 * Throws unless every value of `filter` is what Filter says it is: a string, a number, a boolean or
 * null (absent). A value that arrived as an object from a request body a caller forgot to check
 * would otherwise be a MongoDB operator (`{"$ne": null}` matches every document), or bound by
 * another store in its own way: each adapter refuses it the same way instead.
 */
export function assertFilterValues(filter: Filter): void {
  for (const [field, value] of Object.entries(filter)) {
    if (isUnset(value) || ['string', 'number', 'boolean'].includes(typeof value)) continue;
    throw new TypeError(
      `a store filter compares ${field} with a string, a number, a boolean or null, not ${Array.isArray(value) ? 'an array' : typeof value}`,
    );
  }
}

/** True when `doc` satisfies an equality filter; `null` matches absent or null. */
export function matchesFilter(doc: StoredDoc, filter: Filter): boolean {
  return Object.entries(filter).every(([field, value]) =>
    isUnset(value) ? isUnset(doc[field]) : doc[field] === value,
  );
}

/** skip/limit as whole, non-negative numbers; `limit` undefined means no limit, and 0 means no documents. */
export function pageOf(options: FindOptions): { skip: number; limit: number | undefined } {
  const skip = Math.max(0, Math.floor(options.skip ?? 0));
  const limit = options.limit === undefined ? undefined : Math.max(0, Math.floor(options.limit));
  return { skip, limit };
}

/** The search to apply, or null when it matches every document (none, or empty text); its fields validated. */
export function activeSearch(search: TextSearch | undefined): TextSearch | null {
  if (!search || search.text === '') return null;
  for (const field of search.fields) assertFieldName(field);
  return search;
}

/** Lower case for ASCII letters only: what SQLite's lower() does, so that both stores fold the same letters. */
export function asciiLower(text: string): string {
  return text.replace(/[A-Z]/g, (letter) => letter.toLowerCase());
}
