/**
 * `npm run docs:admin-api`: writes docs/admin-api.md, the Admin API's reference rendered from the
 * OpenAPI document the server serves at GET /admin/api/openapi.json (src/admin/openapi.ts): every
 * operation with its parameters, body (and example), answers, and every schema's fields.
 * test/foundation/references.test.ts fails when the committed file differs from what this writes.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { adminOpenApi, UPSERT_BY } from '../src/admin/index.js';
import { projectPath } from '../src/config/index.js';

export const ADMIN_API_REFERENCE = 'docs/admin-api.md';

/** The issuer the rendered document names; a server's own is its ISSUER. */
const ISSUER = 'http://localhost:9000';

type Json = Record<string, unknown>;
interface Operation {
  operationId: string;
  summary: string;
  tags: string[];
  parameters?: Json[];
  requestBody?: { content: { 'application/json': { schema: Json; examples?: { example?: { value: unknown } } } } };
  responses: Record<string, Json>;
}

/** The reference's Markdown, from the OpenAPI document. */
export function adminApiReference(): string {
  const document = adminOpenApi({ issuer: ISSUER, upserts: UPSERT_BY }) as Json;
  const info = document.info as { description: string };
  const components = document.components as Record<string, Record<string, Json>>;
  const operations = Object.entries(document.paths as Record<string, Record<string, Operation>>).flatMap(
    ([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation })),
  );
  const tags = [...new Set(operations.map(({ operation }) => operation.tags[0]))];
  const lines = [
    '# Admin API reference',
    '',
    '<!-- Written by `npm run docs:admin-api` (scripts/admin-api-reference.ts) from the OpenAPI document of',
    'src/admin/openapi.ts: edit that, then run it. -->',
    '',
    `Rendered from the OpenAPI ${String(document.openapi)} document a server serves at \`GET /admin/api/openapi.json\``,
    '(load that into Postman, Insomnia, Bruno, Swagger UI or a client generator). Every path below is under',
    '`<ISSUER>/admin/api`. The Admin API in prose (paging, search, tenants, secrets, revocation, keys and',
    'roles): [administration.md](administration.md).',
    '',
    info.description,
    '',
    '## Operations',
    '',
    '| Method | Path | Summary |',
    '|---|---|---|',
    ...operations.map(
      ({ path, method, operation }) =>
        `| ${method.toUpperCase()} | [\`${path}\`](#${anchorOf(operation.operationId)}) | ${cell(operation.summary)} |`,
    ),
    '',
  ];
  for (const tag of tags) {
    lines.push(`## ${tag}`, '');
    for (const { path, method, operation } of operations.filter((each) => each.operation.tags[0] === tag))
      lines.push(...operationLines(path, method, operation, components));
  }
  lines.push('## Schemas', '');
  for (const [name, schema] of Object.entries(components.schemas!)) lines.push(...schemaLines(name, schema));
  return `${lines.join('\n').replace(/\n+$/, '')}\n`;
}

function operationLines(
  path: string,
  method: string,
  operation: Operation,
  components: Record<string, Record<string, Json>>,
): string[] {
  const lines = [`### ${operation.operationId}`, '', `\`${method.toUpperCase()} ${path}\`: ${operation.summary}.`, ''];
  const parameters = (operation.parameters ?? []).map((parameter) => resolve(parameter, components));
  if (parameters.length > 0) {
    lines.push('| Parameter | In | Type | Meaning |', '|---|---|---|---|');
    for (const parameter of parameters)
      lines.push(
        `| \`${String(parameter.name)}\`${parameter.required ? ' (required)' : ''} | ${String(parameter.in)} | ${cell(typeOf(parameter.schema as Json))} | ${cell(String(parameter.description ?? ''))} |`,
      );
    lines.push('');
  }
  const body = operation.requestBody?.content['application/json'];
  if (body) {
    lines.push(`Body: ${typeOf(body.schema)}.`, '');
    const example = body.examples?.example?.value;
    if (example !== undefined) lines.push('```json', JSON.stringify(example, null, 2), '```', '');
  }
  lines.push('| Status | Answer |', '|---|---|');
  for (const [status, answer] of Object.entries(operation.responses)) {
    const resolved = resolve(answer, components);
    const schema = (resolved.content as Record<string, { schema: Json }> | undefined)?.['application/json']?.schema;
    const headers = Object.keys((resolved.headers as Json | undefined) ?? {});
    const parts = [
      String(resolved.description ?? ''),
      schema ? `body ${typeOf(schema)}` : '',
      headers.length > 0 ? `headers ${headers.map((header) => `\`${header}\``).join(', ')}` : '',
    ].filter(Boolean);
    lines.push(`| ${status} | ${cell(parts.join('; '))} |`);
  }
  lines.push('');
  return lines;
}

/** A schema's fields (nested objects' fields by their dotted path), or its type when it has none. */
function schemaLines(name: string, schema: Json): string[] {
  const lines = [`### ${name}`, ''];
  if (typeof schema.description === 'string') lines.push(schema.description, '');
  const rows = fieldRows('', schema);
  if (rows.length === 0) return [...lines, `${typeOf(schema)}.`, ''];
  return [...lines, '| Field | Type | Meaning |', '|---|---|---|', ...rows, ''];
}

function fieldRows(prefix: string, schema: Json): string[] {
  const properties = schema.properties as Record<string, Json> | undefined;
  const parts = [...((schema.allOf as Json[] | undefined) ?? [])].filter((part) => !part.$ref);
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const rows = Object.entries(properties ?? {}).flatMap(([field, property]) => {
    const path = `${prefix}${field}`;
    const nested = property.type === 'object' && property.properties ? fieldRows(`${path}.`, property) : [];
    const meaning = typeof property.description === 'string' ? property.description : '';
    return [
      `| \`${path}\`${required.has(field) ? ' (required)' : ''} | ${cell(typeOf(property))} | ${cell(meaning)} |`,
      ...nested,
    ];
  });
  return [...rows, ...parts.flatMap((part) => fieldRows(prefix, part))];
}

/** A schema in words: a reference as a link, a choice as its values, an array by its items. */
function typeOf(schema: Json | boolean | undefined): string {
  if (schema === undefined || schema === true) return 'any';
  if (schema === false) return 'nothing';
  if (typeof schema.$ref === 'string') {
    const name = schema.$ref.split('/').pop()!;
    return `[${name}](#${name.toLowerCase()})`;
  }
  if ('const' in schema) return `\`${JSON.stringify(schema.const)}\``;
  // A part that only pins fields (the error code of an Error): "with `error` `"invalid_request"`".
  if (schema.type === undefined && schema.properties && !schema.$ref && Object.keys(schema).length === 1)
    return `with ${Object.entries(schema.properties as Record<string, Json>)
      .map(([field, property]) => `\`${field}\` ${typeOf(property)}`)
      .join(', ')}`;
  if (Array.isArray(schema.enum))
    return `one of ${schema.enum.map((value) => `\`${JSON.stringify(value)}\``).join(', ')}`;
  for (const [keyword, joiner] of [
    ['oneOf', ' or '],
    ['anyOf', ' or '],
    ['allOf', ' '],
  ] as const)
    if (Array.isArray(schema[keyword])) return (schema[keyword] as Json[]).map(typeOf).join(joiner);
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : [String(schema.type ?? 'object')];
  return types
    .map((type) => {
      if (type === 'array') return `array of ${typeOf(schema.items as Json | undefined)}`;
      if (type === 'string' && typeof schema.format === 'string') return `string (${schema.format})`;
      return type;
    })
    .join(' or ');
}

function resolve(value: Json, components: Record<string, Record<string, Json>>): Json {
  if (typeof value.$ref !== 'string') return value;
  const [, , kind = '', name = ''] = value.$ref.split('/');
  const resolved = components[kind]?.[name];
  if (!resolved) throw new Error(`${value.$ref} names nothing in the document's components`);
  return resolved;
}

/** A table cell: one line, no column break. */
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

const anchorOf = (heading: string) => heading.toLowerCase();

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(projectPath(ADMIN_API_REFERENCE), adminApiReference());
  console.log(`written: ${ADMIN_API_REFERENCE}`);
}
