/**
 * `npm run docs:config`: writes docs/configuration-reference.md, every setting with its
 * environment variable, configuration-file key, type and limits (the schema), default
 * (config/default.json) and meaning (src/config/descriptions.ts).
 * test/foundation/references.test.ts fails when the committed file differs from what this writes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ENVIRONMENT, PATTERN_HINTS, projectPath, SCHEMA } from '../src/config/index.js';
import { SETTING_DESCRIPTIONS, type SettingDescription } from '../src/config/descriptions.js';

export const CONFIGURATION_REFERENCE = 'docs/configuration-reference.md';

/** A schema property, as much of it as the reference reads. */
interface Property {
  type?: string | readonly string[];
  enum?: readonly string[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  items?: Property;
}

const HEADER = `# Configuration reference

<!-- Written by \`npm run docs:config\` (scripts/config-reference.ts) from the schema in
src/config/index.ts, config/default.json and src/config/descriptions.ts: edit those, then run it. -->

Every setting of Arbiter. Each is read from its environment variable, which wins over a
\`CONFIG_FILE\` (a JSON file with the keys of the second column; \`ttl.*\` as an object \`"ttl": {…}\`),
which wins over \`config/default.json\`. A bad value stops the start with one line naming the
variable and what it may be ([configuration.md](configuration.md)).

| Variable | Key | Type | Default | Meaning |
|---|---|---|---|---|
`;

const FOOTER = `
Two variables are not settings of their own:

- \`CONFIG_FILE\`: a JSON file outside the checkout with any of the keys above
  ([configuration.md](configuration.md#configuration-outside-the-checkout)).
- \`NODE_ENV=production\`: requires \`SERVICE_ADMIN_API_KEY\` and \`SERVICE_SECRETS_KEY\`, turns
  \`OUTBOUND_ALLOW_INSECURE_LOOPBACK\` off by default, and warns at start about an \`http://\`
  \`ISSUER\` and a missing \`METRICS_TOKEN\`.
`;

/** The reference's Markdown, from the schema, the defaults and the descriptions. */
export function configurationReference(): string {
  const defaults = JSON.parse(readFileSync(projectPath('config', 'default.json'), 'utf8')) as Record<string, unknown>;
  const undescribed = Object.keys(ENVIRONMENT).filter((variable) => !SETTING_DESCRIPTIONS[variable]);
  const unknown = Object.keys(SETTING_DESCRIPTIONS).filter((variable) => !ENVIRONMENT[variable]);
  if (undescribed.length > 0 || unknown.length > 0)
    throw new Error(
      `src/config/descriptions.ts must describe exactly the settings of ENVIRONMENT: missing ${undescribed.join(', ') || 'none'}; unknown ${unknown.join(', ') || 'none'}`,
    );
  const rows = Object.entries(ENVIRONMENT).map(([variable, key]) => {
    const description = SETTING_DESCRIPTIONS[variable]!; // every setting is described: checked above
    const cells = [
      `\`${variable}\``,
      `\`${key}\``,
      typeOf(key, propertyOf(key)),
      defaultOf(valueAt(defaults, key), description),
      description.meaning,
    ];
    return `| ${cells.map((cell) => cell.replaceAll('|', '\\|')).join(' | ')} |`;
  });
  return `${HEADER}${rows.join('\n')}\n${FOOTER}`;
}

function propertyOf(key: string): Property {
  const properties = SCHEMA.properties as Record<string, Property>;
  const ttl = SCHEMA.properties.ttl.properties as Record<string, Property>;
  const property = key.startsWith('ttl.') ? ttl[key.slice(4)] : properties[key];
  if (!property) throw new Error(`ENVIRONMENT names ${key}, which the configuration schema does not have`);
  return property;
}

function valueAt(defaults: Record<string, unknown>, key: string): unknown {
  return key.startsWith('ttl.') ? (defaults.ttl as Record<string, unknown>)[key.slice(4)] : defaults[key];
}

/** The type in words, with its limits: what the start-up check accepts. */
function typeOf(key: string, property: Property): string {
  if (property.enum) return `one of ${property.enum.map((value) => `\`${value}\``).join(', ')}`;
  const types = Array.isArray(property.type) ? property.type : [property.type ?? 'string'];
  const type = types.find((each) => each !== 'null');
  const hint = PATTERN_HINTS[key.replace(/^ttl\./, '')];
  if (type === 'boolean') return '`true` or `false`';
  if (type === 'array') {
    const item = PATTERN_HINTS[key] ?? 'a string';
    return `comma-separated list, each ${item}`;
  }
  if (type === 'integer' || type === 'number') return `${type}${range(property)}`;
  // A hint is prose that may hold `<file>`, which Markdown would take for a tag.
  if (hint) return hint.replaceAll('<', '&lt;');
  const lengths = [
    property.minLength && property.minLength > 1 ? `at least ${property.minLength} characters` : '',
    property.maxLength ? `at most ${property.maxLength} characters` : '',
  ].filter(Boolean);
  return lengths.length > 0 ? `string, ${lengths.join(', ')}` : 'string';
}

function range(property: Property): string {
  const { minimum, maximum, exclusiveMinimum } = property;
  if (minimum !== undefined && maximum !== undefined) return `, ${minimum} to ${maximum}`;
  const limits = [
    exclusiveMinimum !== undefined ? `> ${exclusiveMinimum}` : minimum !== undefined ? `≥ ${minimum}` : '',
    maximum !== undefined ? `≤ ${maximum}` : '',
  ].filter(Boolean);
  return limits.length > 0 ? `, ${limits.join(', ')}` : '';
}

function defaultOf(value: unknown, description: SettingDescription): string {
  if (value === null || value === undefined) return description.unset ? `unset: ${description.unset}` : 'unset';
  if (Array.isArray(value)) return value.length === 0 ? 'empty' : `\`${value.join(',')}\``;
  return `\`${String(value)}\``;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(projectPath(CONFIGURATION_REFERENCE), configurationReference());
  console.log(`written: ${CONFIGURATION_REFERENCE}`);
}
