import { nestingExceeds } from '../../http/body.js';
/**
 * Policy data entries → the `data` document policies see, and → the bundle's data.json files.
 *
 * Entries may nest ("oauth" and "oauth.resource_types"). OPA refuses a bundle whose data
 * files disagree about the same leaf, so the entries are merged here first (a deeper key wins
 * over the value a shallower entry gives the same place), and each entry's file then holds
 * the merged value at its key minus the branches owned by deeper entries.
 */

export const DATA_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

export interface DataEntry {
  dataKey: string;
  value: unknown;
}

type JsonObject = Record<string, unknown>;

/** Null when the entry can be bundled, else why not. */
export function dataEntryProblem(dataKey: string, payload: string): string | null {
  if (!DATA_KEY_PATTERN.test(dataKey))
    return 'dataKey must be identifiers separated by dots (e.g. oauth.resource_types)';
  if (dataKey === 'system' || dataKey.startsWith('system.'))
    return 'dataKey must not be under "system" (reserved by OPA)';
  if (dataKey.split('.').includes(PROTOTYPE_KEY))
    return `dataKey must not have ${PROTOTYPE_KEY} as a part (JavaScript's name for the prototype of an object)`;
  if (nestingExceeds(payload, MAX_DATA_DEPTH))
    return `payload nests arrays and objects deeper than ${MAX_DATA_DEPTH} levels`;
  try {
    JSON.parse(payload);
    return null;
  } catch (error) {
    return `payload is not valid JSON: ${(error as Error).message}`;
  }
}

/**
 * Refused as a part of a data key: merging the entries would walk into the prototype every object
 * of the process shares, and write there (prototype pollution) instead of into the data.
 */
const PROTOTYPE_KEY = '__proto__';

/** Deeper data serves no policy, and breaks what handles it (serialising the bundle recurses). */
const MAX_DATA_DEPTH = 64;

/** The merged document; `data.<dataKey>` of a policy equals `valueAt(mergeData(entries), dataKey)`. */
export function mergeData(entries: DataEntry[]): JsonObject {
  const tree: JsonObject = {};
  const shallowFirst = [...entries].sort(
    (a, b) => depth(a.dataKey) - depth(b.dataKey) || (a.dataKey < b.dataKey ? -1 : 1),
  );
  for (const entry of shallowFirst) setAt(tree, entry.dataKey.split('.'), entry.value);
  return tree;
}

export function valueAt(tree: JsonObject, dataKey: string): unknown {
  let node: unknown = tree;
  for (const segment of dataKey.split('.')) {
    if (!isObject(node) || !Object.hasOwn(node, segment)) return undefined;
    node = node[segment];
  }
  return node;
}

/** One data.json file per entry: bundle path → JSON value. */
export function dataFiles(entries: DataEntry[]): Map<string, unknown> {
  const merged = mergeData(entries);
  const keys = [...new Set(entries.map((entry) => entry.dataKey))].sort();
  const files = new Map<string, unknown>();
  for (const key of keys) {
    const deeper = keys
      .filter((other) => other.startsWith(`${key}.`))
      .map((other) => other.slice(key.length + 1).split('.'));
    files.set(`${key.split('.').join('/')}/data.json`, withoutBranches(valueAt(merged, key), deeper));
  }
  return files;
}

function setAt(tree: JsonObject, segments: string[], value: unknown): void {
  let node = tree;
  for (const segment of segments.slice(0, -1)) {
    if (!isObject(ownValue(node, segment))) put(node, segment, {});
    node = ownValue(node, segment) as JsonObject;
  }
  const last = segments.at(-1);
  if (last === undefined) throw new Error('a data key has at least one segment');
  const existing = ownValue(node, last);
  put(node, last, isObject(existing) && isObject(value) ? deepMerge(existing, value) : value);
}

/** `overrides` wins wherever both have a non-object value. */
function deepMerge(base: JsonObject, overrides: JsonObject): JsonObject {
  const merged: JsonObject = { ...base };
  for (const [key, value] of Object.entries(overrides)) {
    const existing = ownValue(merged, key);
    put(merged, key, isObject(existing) && isObject(value) ? deepMerge(existing, value) : value);
  }
  return merged;
}

function withoutBranches(value: unknown, branches: string[][]): unknown {
  if (branches.length === 0 || !isObject(value)) return value;
  const kept: JsonObject = {};
  for (const [key, child] of Object.entries(value)) {
    const below = branches.filter((branch) => branch[0] === key);
    if (below.some((branch) => branch.length === 1)) continue;
    put(
      kept,
      key,
      withoutBranches(
        child,
        below.map((branch) => branch.slice(1)),
      ),
    );
  }
  return kept;
}

/**
 * A key of the data as the data's own, as JSON.parse makes it: a payload may hold any key,
 * `__proto__` too, and `object[key]` would read or set the object's prototype for that one.
 */
function ownValue(node: JsonObject, key: string): unknown {
  return Object.hasOwn(node, key) ? node[key] : undefined;
}

function put(node: JsonObject, key: string, value: unknown): void {
  Object.defineProperty(node, key, { value, enumerable: true, writable: true, configurable: true });
}

function depth(dataKey: string): number {
  return dataKey.split('.').length;
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
