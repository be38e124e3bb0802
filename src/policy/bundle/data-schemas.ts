/**
 * Schemas for policy data. Rego reads a mistyped or misspelt entry as absent, and the pack's
 * rules then fail open (`withheld_scopes: "write"` withholds nothing), so every write of policy
 * data is checked as the merged document policies would see: the pack's keys against the schema
 * beside their package (policies/<key>/data.schema.json), and an author's own key against the
 * `schema` its data entry brings. A mismatch is refused naming the field.
 *
 * An author's schema is code the Admin API is given, compiled by Ajv: it must pass Ajv's secure
 * meta-schema, use no regular expression (a pattern can backtrack for minutes on one value) and
 * refer only inside itself, and it is bounded in size and depth.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { LRUCache } from 'lru-cache';
import { valueAt } from './data-tree.js';

/** A schema an author's data entry brings, as stored: JSON text. */
export interface SchemaCarrier {
  dataKey: string;
  schema?: string | null;
}

const ajv = new Ajv({ allErrors: false, strict: false });
let secureSchemaCheck: ValidateFunction | undefined;

/** Ajv's secure meta-schema, compiled at the first author schema (not by every process that loads this module). */
function isSecureSchema(schema: unknown): boolean {
  secureSchemaCheck ??= ajv.compile(createRequire(import.meta.url)('ajv/dist/refs/json-schema-secure.json') as object);
  return secureSchemaCheck(schema);
}
const MAX_SCHEMA_DEPTH = 32;
const FORBIDDEN_KEYWORDS = new Set(['pattern', 'patternProperties', 'format', '$dynamicRef', '$recursiveRef']);

/** The pack's schemas, by data key, read once from the pack directory. */
export function packSchemas(packDir: string): Map<string, ValidateFunction> {
  const schemas = new Map<string, ValidateFunction>();
  for (const entry of readdirSync(packDir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const file = join(packDir, entry.name, 'data.schema.json');
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    schemas.set(entry.name, ajv.compile(JSON.parse(text) as object));
  }
  return schemas;
}

/** Null when an author's schema may be compiled and run, else why not. */
export function authorSchemaProblem(text: string): string | null {
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (error) {
    return `schema is not valid JSON: ${(error as Error).message}`;
  }
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return 'schema must be a JSON object';
  const unsafe = unsafeKeyword(schema, 0);
  if (unsafe) return `schema ${unsafe}`;
  if (!isSecureSchema(schema)) return `schema is not safe to run: ${ajv.errorsText(secureSchemaCheck?.errors)}`;
  try {
    compiledAuthorSchema(text);
    return null;
  } catch (error) {
    return `schema does not compile: ${(error as Error).message}`;
  }
}

/**
 * Null when the merged data matches every schema that applies to it, else the first mismatch,
 * naming the field as policies reach it (`data.oauth.clients.app.withheld_scopes must be array`).
 */
export function dataSchemaProblem(
  mergedData: Record<string, unknown>,
  entries: SchemaCarrier[],
  pack: Map<string, ValidateFunction>,
): string | null {
  const checks: [string, () => ValidateFunction][] = [...pack].map(([key, validate]) => [key, () => validate]);
  for (const entry of entries) {
    if (!entry.schema) continue;
    const problem = authorSchemaProblem(entry.schema);
    if (problem) return `the ${entry.dataKey} entry's ${problem}`;
    checks.push([entry.dataKey, () => compiledAuthorSchema(entry.schema as string)]);
  }
  for (const [key, validateFor] of checks) {
    const value = valueAt(mergedData, key);
    if (value === undefined) continue;
    const validate = validateFor();
    if (!validate(value))
      return `policy data does not match the schema of data.${key}: ${describe(key, validate.errors?.[0])}`;
  }
  return null;
}

// Ajv keeps every schema it compiled (by the parsed object, so the same text parsed again is one
// more), so a schema leaving this cache leaves Ajv too: else each new schema an author tries
// stays in the sandbox for good.
const compiledSchemas = new LRUCache<string, ValidateFunction>({
  max: 256,
  dispose: (validate) => ajv.removeSchema(validate.schema as object),
});

/** How many schemas this module's Ajv holds compiled, read from Ajv's own cache: for the test that bounds it. */
export function heldSchemaCount(): number {
  return (ajv as unknown as { _cache: Map<unknown, unknown> })._cache.size;
}

function compiledAuthorSchema(text: string): ValidateFunction {
  let validate = compiledSchemas.get(text);
  if (!validate) {
    validate = ajv.compile(JSON.parse(text) as object);
    compiledSchemas.set(text, validate);
  }
  return validate;
}

/** Keywords whose value JSON Schema makes a string (a URI or a name). */
const REFERENCE_KEYWORDS = new Set(['$id', '$ref', '$anchor', '$dynamicRef', '$dynamicAnchor', '$schema']);

function unsafeKeyword(node: unknown, depth: number): string | null {
  if (depth > MAX_SCHEMA_DEPTH) return `nests deeper than ${MAX_SCHEMA_DEPTH} levels`;
  if (Array.isArray(node)) {
    for (const item of node) {
      const found = unsafeKeyword(item, depth + 1);
      if (found) return found;
    }
    return null;
  }
  if (typeof node !== 'object' || node === null) return null;
  for (const [key, value] of Object.entries(node)) {
    if (FORBIDDEN_KEYWORDS.has(key))
      return `uses "${key}", which data schemas may not (no regular expressions or formats)`;
    // Found 2026-11-30: a `$id` of another type reached Ajv, which answered with its own TypeError.
    // A schema's value under that name (a property named "$id", say) is left to the walk below.
    if (REFERENCE_KEYWORDS.has(key) && (value === null || typeof value !== 'object') && typeof value !== 'string')
      return `gives "${key}" a value that is no string`;
    if ((key === '$ref' || key === '$id') && typeof value === 'string' && !value.startsWith('#'))
      return `refers outside itself ("${key}": "${value}")`;
    const found = unsafeKeyword(value, depth + 1);
    if (found) return found;
  }
  return null;
}

function describe(key: string, error: ErrorObject | undefined): string {
  if (!error) return 'it is invalid';
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
  const at = ['data', key, ...segments].join('.');
  if (error.keyword === 'additionalProperties')
    return `${at}.${(error.params as { additionalProperty: string }).additionalProperty} is not a known field`;
  if (error.keyword === 'required')
    return `${at}.${(error.params as { missingProperty: string }).missingProperty} is required`;
  return `${at} ${error.message ?? 'is invalid'}`;
}
