import type { CollectionDefinition } from '../../../../catalog/collections.js';
import { ApiError, api } from '../api.js';
import { h, humanize, replace, say, statusLine, uniqueId } from '../dom.js';
import { bodyOf, clearFieldErrors, fieldNamed, fieldsOf, showFieldError, type Field } from '../fields.js';
import { showServedRevision } from '../revision.js';
import { historyPanel } from './history.js';

type AdminRecord = Record<string, unknown> & { id: number };

/** Collections whose writes change the policy bundle: a save waits for OPA to serve it. */
const POLICY_COLLECTIONS = new Set(['policy-rules', 'policy-data']);

/** How many columns of a record the list shows besides its key. */
const SUMMARY_COLUMNS = 3;

/** List, create, edit and delete of one Admin collection; forms come from its JSON schema. */
export function collectionPage(main: HTMLElement, definition: CollectionDefinition): void {
  const title = humanize(definition.path);
  const status = statusLine();
  const formArea = h('div', { class: 'form-area' });
  const listArea = h('div', { class: 'list-area' });
  const columns = summaryColumns(definition);
  const keyOf = (record: AdminRecord) => String(definition.pathKey === 'id' ? record.id : record[definition.pathKey]);

  async function load(): Promise<void> {
    try {
      const records = await api<AdminRecord[]>('GET', `/${definition.path}`);
      replace(listArea, table(records));
    } catch (error) {
      say(status, (error as Error).message, 'error');
    }
  }

  function table(records: AdminRecord[]): HTMLElement {
    if (records.length === 0) return h('p', {}, `No ${title.toLowerCase()} in this tenant yet.`);
    return h(
      'table',
      {},
      h('caption', {}, `${title} (${records.length})`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, humanize(definition.pathKey)),
          columns.map((column) => h('th', { scope: 'col' }, humanize(column))),
          h('th', { scope: 'col' }, 'Actions'),
        ),
      ),
      h(
        'tbody',
        {},
        records.map((record) => row(record)),
      ),
    );
  }

  function row(record: AdminRecord): HTMLElement {
    const key = keyOf(record);
    const remove = h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${key}` }, 'Delete');
    remove.addEventListener('click', () => confirmThenDelete(remove, record));
    return h(
      'tr',
      {},
      h('th', { scope: 'row' }, key),
      columns.map((column) => h('td', {}, cell(record[column]))),
      h(
        'td',
        { class: 'actions' },
        h('button', { type: 'button', 'aria-label': `Edit ${key}`, onclick: () => openForm(record) }, 'Edit'),
        POLICY_COLLECTIONS.has(definition.path)
          ? h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                'aria-label': `History of ${key}`,
                onclick: () => openHistory(record),
              },
              'History',
            )
          : null,
        remove,
      ),
    );
  }

  /** Two steps, in the page (no modal dialog): the first click asks, the second deletes. */
  async function confirmThenDelete(button: HTMLButtonElement, record: AdminRecord): Promise<void> {
    if (button.dataset.armed !== 'true') {
      button.dataset.armed = 'true';
      button.textContent = 'Confirm delete';
      return;
    }
    try {
      await api('DELETE', `/${definition.path}/${encodeURIComponent(keyOf(record))}`);
      say(status, `Deleted ${keyOf(record)}.`, 'ok');
      await load();
      if (POLICY_COLLECTIONS.has(definition.path)) await showServedRevision(status);
    } catch (error) {
      say(status, (error as Error).message, 'error');
    }
  }

  /** A policy record's versions: compare, roll back (then the list and the served revision are shown again). */
  function openHistory(record: AdminRecord): void {
    const label = String(record.path ?? record.dataKey ?? keyOf(record));
    replace(
      formArea,
      historyPanel(definition.path, record.id, label, async () => {
        await load();
        await showServedRevision(status);
      }),
    );
    formArea.querySelector('h3')?.focus();
  }

  function openForm(record?: AdminRecord): void {
    const fields = fieldsOf(definition, record);
    const headingId = uniqueId('form-title');
    const formStatus = statusLine();
    const form = h(
      'form',
      { novalidate: true, 'aria-labelledby': headingId, class: 'record-form' },
      h('h3', { id: headingId, tabindex: -1 }, record ? `Edit ${keyOf(record)}` : `New ${singular(title)}`),
      fields.map((item) => item.wrapper),
      formStatus,
      h(
        'div',
        { class: 'buttons' },
        h('button', { type: 'submit' }, 'Save'),
        h(
          'button',
          { type: 'button', onclick: () => check(fields, formStatus) },
          definition.path === 'policy-rules' ? 'Check with the engine' : 'Check',
        ),
        h('button', { type: 'button', class: 'secondary', onclick: () => replace(formArea) }, 'Cancel'),
      ),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void save(fields, formStatus, record);
    });
    replace(formArea, form);
    form.querySelector('h3')?.focus();
  }

  /** The body of the form, or null when a field could not be read (its error is shown). */
  async function readForm(fields: Field[], formStatus: HTMLElement): Promise<Record<string, unknown> | null> {
    clearFieldErrors(fields);
    say(formStatus, '');
    const body = await bodyOf(fields);
    if (!body) fields.find((item) => item.input.getAttribute('aria-invalid') === 'true')?.input.focus();
    return body;
  }

  /** Asks the API whether it would accept the form (POST …/validate): nothing is stored. */
  async function check(fields: Field[], formStatus: HTMLElement): Promise<void> {
    const body = await readForm(fields, formStatus);
    if (!body) return;
    try {
      await api('POST', `/${definition.path}/validate`, body);
      say(formStatus, 'Valid: the server would accept this.', 'ok');
    } catch (error) {
      showApiError(fields, formStatus, error, 'Not valid');
    }
  }

  async function save(fields: Field[], formStatus: HTMLElement, record?: AdminRecord): Promise<void> {
    const body = await readForm(fields, formStatus);
    if (!body) return;
    try {
      const saved = record
        ? await api<AdminRecord>('PUT', `/${definition.path}/${encodeURIComponent(keyOf(record))}`, body)
        : await api<AdminRecord>('POST', `/${definition.path}`, body);
      replace(formArea, shownOnce(saved));
      say(status, `Saved ${keyOf(saved)}.`, 'ok');
      await load();
      if (POLICY_COLLECTIONS.has(definition.path)) await showServedRevision(status);
    } catch (error) {
      showApiError(fields, formStatus, error, 'Not saved');
    }
  }

  replace(
    main,
    h('h2', { tabindex: -1 }, title),
    h(
      'div',
      { class: 'toolbar' },
      h('button', { type: 'button', onclick: () => openForm() }, `New ${singular(title)}`),
    ),
    status,
    formArea,
    listArea,
  );
  void load();
}

/** The API's error next to the field it names (the `field` of its 400 or 409), else under the form. */
function showApiError(
  fields: Field[],
  formStatus: HTMLElement,
  error: unknown,
  outcome: 'Not valid' | 'Not saved',
): void {
  const message = error instanceof ApiError ? error.message : `The request failed: ${(error as Error).message}`;
  const item = fieldNamed(fields, error instanceof ApiError ? error.field : undefined);
  if (item) {
    showFieldError(item, message);
    item.input.focus();
    say(formStatus, `${outcome}: see ${humanize(item.name)}.`, 'error');
  } else say(formStatus, `${outcome}: ${message}`, 'error');
}

/** A token the API shows only in the answer to its creation (initial access tokens). */
function shownOnce(saved: AdminRecord): HTMLElement | null {
  if (typeof saved.token !== 'string') return null;
  return h(
    'div',
    { class: 'notice', role: 'alert' },
    h('p', {}, 'Copy this token now: it is shown only once.'),
    h('code', {}, saved.token),
  );
}

function summaryColumns(definition: CollectionDefinition): string[] {
  const properties = (definition.schema as { properties: Record<string, { type?: unknown }> }).properties;
  return Object.entries(properties)
    .filter(
      ([name, property]) =>
        name !== definition.pathKey &&
        name !== 'tenantId' &&
        !definition.secretFields?.includes(name) &&
        isScalar(property),
    )
    .map(([name]) => name)
    .slice(0, SUMMARY_COLUMNS);
}

function isScalar(property: { type?: unknown; enum?: unknown; format?: unknown }): boolean {
  if (property.format === 'client-secret') return false;
  if (property.enum) return true;
  const types = Array.isArray(property.type) ? property.type : [property.type];
  return types.some((type) => type === 'string' || type === 'integer' || type === 'boolean');
}

function cell(value: unknown): string {
  if (value === undefined || value === null) return '';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

function singular(title: string): string {
  const lower = title.toLowerCase();
  if (lower.endsWith('policy data')) return lower;
  return lower.replace(/ies$/, 'y').replace(/s$/, '');
}
