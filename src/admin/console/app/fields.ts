import bcrypt from 'bcryptjs';
import type { CollectionDefinition } from '../../../catalog/collections.js';
import { h, humanize, uniqueId } from './dom.js';

type Schema = {
  type?: string | string[];
  enum?: unknown[];
  format?: string;
  maxLength?: number;
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
};

/** How a schema property is edited. */
type Kind =
  'text' | 'nullable' | 'integer' | 'boolean' | 'enum' | 'lines' | 'json' | 'jsonText' | 'source' | 'secret' | 'bcrypt';

/** String fields whose value is itself a JSON document (checked in the browser before sending). */
const JSON_TEXT_FIELDS: Record<string, string[]> = { 'policy-data': ['payload'] };

/** A field of a record form: its input, where its error shows, and how its value is read. */
export interface Field {
  name: string;
  input: HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement;
  wrapper: HTMLElement;
  error: HTMLElement;
  /** The value for the request body (undefined: leave the field out); throws a message when unreadable. */
  read(): Promise<unknown>;
}

/** The editable fields of a collection, straight from its JSON schema (tenantId is the tenant switcher's). */
export function fieldsOf(definition: CollectionDefinition, record?: Record<string, unknown>): Field[] {
  const schema = definition.schema as Schema;
  const required = new Set(schema.required ?? []);
  return (
    Object.entries(schema.properties ?? {})
      // A generated secret is shown once in the API's answer, which this form does not show: the secret is typed here.
      .filter(([name]) => name !== 'tenantId' && name !== definition.hashedSecret?.generate)
      .map(([name, property]) => field(name, kindOf(definition, name, property), property, required.has(name), record))
  );
}

function kindOf(definition: CollectionDefinition, name: string, property: Schema): Kind {
  if (property.format === 'client-secret') return 'bcrypt';
  if (definition.secretFields?.includes(name)) return 'secret';
  if (JSON_TEXT_FIELDS[definition.path]?.includes(name)) return 'jsonText';
  if (property.enum) return 'enum';
  const types = Array.isArray(property.type) ? property.type : [property.type];
  if (types.includes('integer')) return 'integer';
  if (types.includes('boolean')) return 'boolean';
  if (types.includes('array')) return property.items?.type === 'string' || property.items?.enum ? 'lines' : 'json';
  if (types.includes('object')) return 'json';
  if (types.includes('null')) return 'nullable';
  return (property.maxLength ?? 0) > 65536 ? 'source' : 'text';
}

const HINTS: Partial<Record<Kind, string>> = {
  nullable: 'Empty means none (null).',
  lines: 'One per line.',
  json: 'JSON.',
  jsonText: 'A JSON document, checked before it is sent.',
  secret: 'Never shown again. When editing, leave it empty to keep the stored one.',
  bcrypt:
    'Typed in clear, sent only as a BCrypt hash made in this browser. Never shown again: when editing, leave it empty to keep the stored one.',
};

function field(name: string, kind: Kind, property: Schema, required: boolean, record?: Record<string, unknown>): Field {
  const id = uniqueId(`field-${name}`);
  const value = record?.[name];
  const input = inputFor(kind, property, id, value, required);
  input.name = name;
  const error = h('p', { class: 'field-error', id: `${id}-error`, hidden: true });
  const hint = HINTS[kind] ? h('p', { class: 'hint', id: `${id}-hint` }, HINTS[kind]) : null;
  input.setAttribute('aria-describedby', [hint ? `${id}-hint` : '', `${id}-error`].filter(Boolean).join(' '));
  if (required) input.setAttribute('aria-required', 'true');
  const label = h(
    'label',
    { for: id },
    humanize(name),
    required ? h('span', { class: 'required' }, ' (required)') : null,
  );
  const wrapper = h(
    'div',
    { class: `field field-${kind}` },
    kind === 'boolean' ? [input, label] : [label, input],
    hint,
    error,
  );
  return { name, input, wrapper, error, read: () => readValue(kind, input) };
}

function inputFor(kind: Kind, property: Schema, id: string, value: unknown, required: boolean) {
  switch (kind) {
    case 'boolean':
      return h('input', { id, type: 'checkbox', checked: value === undefined ? true : value === true });
    case 'enum':
      return h(
        'select',
        { id },
        required ? null : h('option', { value: '' }, '(not set)'),
        (property.enum ?? []).map((option) =>
          h('option', { value: String(option), selected: option === value }, String(option)),
        ),
      );
    case 'integer':
      return h('input', { id, type: 'number', step: 1, min: 0, value: typeof value === 'number' ? String(value) : '' });
    case 'secret':
    case 'bcrypt':
      return h('input', { id, type: 'password', autocomplete: 'new-password', value: '' });
    case 'lines':
      return h('textarea', { id, rows: 3, value: Array.isArray(value) ? value.join('\n') : '' });
    case 'json':
      return h('textarea', {
        id,
        rows: 4,
        class: 'code',
        spellcheck: 'false',
        value: value === undefined || value === null ? '' : JSON.stringify(value, null, 2),
      });
    case 'jsonText':
    case 'source':
      return h('textarea', {
        id,
        rows: 14,
        class: 'code',
        spellcheck: 'false',
        value: typeof value === 'string' ? value : '',
      });
    default:
      return h('input', { id, type: 'text', value: typeof value === 'string' ? value : '' });
  }
}

async function readValue(kind: Kind, input: Field['input']): Promise<unknown> {
  const text = input.value;
  switch (kind) {
    case 'boolean':
      return (input as HTMLInputElement).checked;
    case 'nullable':
      return text.trim() === '' ? null : text;
    case 'integer':
      if (text.trim() === '') return undefined;
      if (!/^\d+$/.test(text.trim())) throw new Error('must be a whole number');
      return Number(text);
    case 'lines':
      return text.trim() === ''
        ? undefined
        : text
            .split('\n')
            .map((line) => line.trim())
            .filter(Boolean);
    case 'json':
      return text.trim() === '' ? undefined : parseJson(text);
    case 'jsonText':
      if (text.trim() !== '') parseJson(text);
      return text === '' ? undefined : text;
    case 'bcrypt':
      // The Admin API would hash a clear secret itself; hashed here, the clear secret never leaves the browser.
      return text === '' ? undefined : bcrypt.hash(text, 10);
    default:
      return text === '' ? undefined : text;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
}

/** The request body a form's fields make; a field that cannot be read shows its error and stops. */
export async function bodyOf(fields: Field[]): Promise<Record<string, unknown> | null> {
  const body: Record<string, unknown> = {};
  let valid = true;
  for (const item of fields) {
    try {
      const value = await item.read();
      if (value !== undefined) body[item.name] = value;
    } catch (error) {
      showFieldError(item, `${humanize(item.name)} ${(error as Error).message}`);
      valid = false;
    }
  }
  return valid ? body : null;
}

export function showFieldError(item: Field, message: string): void {
  item.error.textContent = message;
  item.error.hidden = false;
  item.input.setAttribute('aria-invalid', 'true');
  item.wrapper.classList.add('invalid');
}

export function clearFieldErrors(fields: Field[]): void {
  for (const item of fields) {
    item.error.hidden = true;
    item.error.textContent = '';
    item.input.removeAttribute('aria-invalid');
    item.wrapper.classList.remove('invalid');
  }
}

/** The form field an API error's `field` (possibly a nested path such as redirectUris.0) is about. */
export function fieldNamed(fields: Field[], path: string | undefined): Field | undefined {
  if (!path) return undefined;
  return fields.find(
    (item) => item.name === path || path.startsWith(`${item.name}.`) || path.split(',').includes(item.name),
  );
}
