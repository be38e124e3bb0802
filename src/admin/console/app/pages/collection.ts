import type { CollectionDefinition } from '../../../../catalog/collections.js';
import { ApiError, api } from '../api.js';
import { asCards, detached, h, humanize, replace, say, statusLine, uniqueId } from '../dom.js';
import {
  bodyOf,
  clearFieldErrors,
  fieldNamed,
  focusTarget,
  recordForm,
  showFieldError,
  type Field,
  type RecordForm,
} from '../fields.js';
import { pagedList } from '../paged-list.js';
import { showServedRevision } from '../revision.js';
import { session } from '../session.js';
import { historyPanel } from './history.js';

type AdminRecord = Record<string, unknown> & { id: number };

/** Collections whose writes change the policy bundle: a save waits for OPA to serve it. */
const POLICY_COLLECTIONS = new Set(['policy-rules', 'policy-data']);

/** How many columns of a record the list shows besides its key. */
const SUMMARY_COLUMNS = 3;

/**
 * List (searched, paged), create, edit and delete of one Admin collection; forms come from its
 * JSON schema and its console hints (src/catalog/collections.ts).
 */
export function collectionPage(main: HTMLElement, definition: CollectionDefinition): void {
  const title = humanize(definition.path);
  const status = statusLine();
  const formArea = h('div', { class: 'form-area' });
  const columns = summaryColumns(definition);
  const keyOf = (record: AdminRecord) => String(definition.pathKey === 'id' ? record.id : record[definition.pathKey]);
  const list = pagedList<AdminRecord>({
    path: `/${definition.path}`,
    noun: title.toLowerCase(),
    searchesIn: definition.searchFields.map((field) => humanize(field).toLowerCase()).join(' or '),
    table,
    empty: `No ${title.toLowerCase()} in this tenant yet.`,
    status,
  });
  const load = () => list.reload();

  function table(records: AdminRecord[], caption: string): HTMLElement {
    return asCards(
      h(
        'table',
        {},
        h('caption', {}, caption),
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
      ),
    );
  }

  function row(record: AdminRecord): HTMLElement {
    const key = keyOf(record);
    const remove = h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${key}` }, 'Delete');
    remove.addEventListener(
      'click',
      detached(() => confirmThenDelete(remove, record)),
    );
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
        REVOKES_TOKENS.has(definition.path) ? revokeTokensButton(record) : null,
        definition.path === 'clients' && record.clientType === 'confidential'
          ? h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                'aria-label': `Rotate secret of ${key}`,
                onclick: () => openRotation(record),
              },
              'Rotate secret',
            )
          : null,
        remove,
      ),
    );
  }

  /** POST /{clients|subjects}/{key}/revoke-tokens: every grant and token of the record, which stays. */
  function revokeTokensButton(record: AdminRecord): HTMLButtonElement {
    const key = keyOf(record);
    const button = h(
      'button',
      { type: 'button', class: 'danger', 'aria-label': `Revoke tokens of ${key}` },
      'Revoke tokens',
    );
    const revoke = async () => {
      if (!armed(button, 'Confirm revoke tokens')) return;
      try {
        const { revoked } = await api<{ revoked: number }>(
          'POST',
          `/${definition.path}/${encodeURIComponent(key)}/revoke-tokens`,
        );
        say(status, `Revoked ${revoked} tokens, codes and grants of ${key}.`, 'ok');
        await load();
      } catch (error) {
        say(status, (error as Error).message, 'error');
      }
    };
    button.addEventListener('click', detached(revoke));
    return button;
  }

  /**
   * POST /clients/{clientId}/secret: a new secret, shown once; the previous one stays valid for
   * the seconds given, so that every replica of the client can change over.
   */
  function openRotation(record: AdminRecord): void {
    const key = keyOf(record);
    const headingId = uniqueId('rotate-title');
    const graceId = uniqueId('grace');
    const formStatus = statusLine();
    const grace = h('input', {
      id: graceId,
      name: 'graceSeconds',
      type: 'number',
      min: '0',
      max: String(MAX_GRACE_SECONDS),
      step: '1',
      value: '3600',
      inputmode: 'numeric',
      'aria-describedby': `${graceId}-hint`,
    }) as HTMLInputElement;
    const form = h(
      'form',
      { novalidate: true, 'aria-labelledby': headingId, class: 'record-form' },
      h('h3', { id: headingId, tabindex: -1 }, `Rotate the secret of ${key}`),
      h(
        'div',
        { class: 'field' },
        h('label', { for: graceId }, 'Keep the previous secret valid for (seconds)'),
        grace,
        h(
          'p',
          { id: `${graceId}-hint`, class: 'hint' },
          'Time for every replica of the client to change over; 0 stops the previous secret at once (at most 30 days).',
        ),
      ),
      formStatus,
      h(
        'div',
        { class: 'buttons' },
        h('button', { type: 'submit' }, 'Rotate'),
        h('button', { type: 'button', class: 'secondary', onclick: () => replace(formArea) }, 'Cancel'),
      ),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void rotate(key, grace, formStatus);
    });
    replace(formArea, form);
    form.querySelector('h3')?.focus();
  }

  async function rotate(key: string, grace: HTMLInputElement, formStatus: HTMLElement): Promise<void> {
    const graceSeconds = Number(grace.value === '' ? 0 : grace.value);
    try {
      const rotated = await api<AdminRecord & { previousSecretValidUntil: string | null }>(
        'POST',
        `/clients/${encodeURIComponent(key)}/secret`,
        { graceSeconds },
      );
      const secret = shownOnce(definition, rotated, key);
      replace(formArea, secret);
      const until = rotated.previousSecretValidUntil;
      say(
        status,
        until
          ? `Rotated the secret of ${key}: the previous one is valid until ${new Date(until).toISOString()}.`
          : `Rotated the secret of ${key}: the previous one no longer works.`,
        'ok',
      );
      (secret?.querySelector('p') as HTMLElement | null)?.focus();
    } catch (error) {
      say(formStatus, `Not rotated: ${error instanceof ApiError ? error.message : (error as Error).message}`, 'error');
      grace.focus();
    }
  }

  /** Two steps, in the page (no modal dialog): the first click asks, the second deletes. */
  async function confirmThenDelete(button: HTMLButtonElement, record: AdminRecord): Promise<void> {
    if (!armed(button, 'Confirm delete')) return;
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
    const made = recordForm(definition, record);
    const { fields } = made;
    const headingId = uniqueId('form-title');
    const formStatus = statusLine();
    const advanced = fields.filter((item) => item.advanced);
    const form = h(
      'form',
      { novalidate: true, 'aria-labelledby': headingId, class: 'record-form' },
      h('h3', { id: headingId, tabindex: -1 }, record ? `Edit ${keyOf(record)}` : `New ${singular(title)}`),
      fields.filter((item) => !item.advanced).map((item) => item.wrapper),
      advanced.length > 0
        ? h(
            'details',
            { class: 'advanced' },
            h('summary', {}, moreSettings(advanced, record)),
            advanced.map((item) => item.wrapper),
          )
        : null,
      formStatus,
      h(
        'div',
        { class: 'buttons' },
        h('button', { type: 'submit' }, 'Save'),
        h(
          'button',
          { type: 'button', onclick: detached(() => check(made, formStatus)) },
          definition.path === 'policy-rules' ? 'Check with the engine' : 'Check',
        ),
        h('button', { type: 'button', class: 'secondary', onclick: () => replace(formArea) }, 'Cancel'),
      ),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void save(made, formStatus, record);
    });
    replace(formArea, form);
    form.querySelector('h3')?.focus();
  }

  /** The body of the form, or null when a field could not be read (its error is shown). */
  async function readForm(made: RecordForm, formStatus: HTMLElement): Promise<Record<string, unknown> | null> {
    clearFieldErrors(made.fields);
    say(formStatus, '');
    const body = await bodyOf(made);
    if (!body) {
      const invalid = made.fields.find((item) => item.wrapper.classList.contains('invalid'));
      if (invalid) focusTarget(invalid)?.focus();
    }
    return body;
  }

  /** Asks the API whether it would accept the form (POST …/validate): nothing is stored. */
  async function check(made: RecordForm, formStatus: HTMLElement): Promise<void> {
    const body = await readForm(made, formStatus);
    if (!body) return;
    try {
      await api('POST', `/${definition.path}/validate`, body);
      say(formStatus, 'Valid: the server would accept this.', 'ok');
    } catch (error) {
      showApiError(made.fields, formStatus, error, 'Not valid');
    }
  }

  async function save(made: RecordForm, formStatus: HTMLElement, record?: AdminRecord): Promise<void> {
    const body = await readForm(made, formStatus);
    if (!body) return;
    try {
      const saved = record
        ? await api<AdminRecord>('PUT', `/${definition.path}/${encodeURIComponent(keyOf(record))}`, body)
        : await api<AdminRecord>('POST', `/${definition.path}`, body);
      const secret = shownOnce(definition, saved, keyOf(saved));
      replace(formArea, secret);
      say(status, `Saved ${keyOf(saved)}.`, 'ok');
      // A new record is last (lists go by id): its page is shown; an edited one stays where it is.
      await (record ? load() : list.showLast(keyOf(saved)));
      // The secret is said first: focus goes to it, so that it is not missed.
      (secret?.querySelector('p') as HTMLElement | null)?.focus();
      if (POLICY_COLLECTIONS.has(definition.path)) await showServedRevision(status);
    } catch (error) {
      showApiError(made.fields, formStatus, error, 'Not saved');
    }
  }

  replace(
    main,
    h('h2', { tabindex: -1 }, title),
    session.may(permissionToWrite(definition))
      ? h(
          'div',
          { class: 'toolbar' },
          h('button', { type: 'button', onclick: () => openForm() }, `New ${singular(title)}`),
        )
      : null,
    status,
    formArea,
    list.element,
  );
}

/** The longest grace a rotated client secret may have (src/oauth/clients/secrets.ts: 30 days). */
const MAX_GRACE_SECONDS = 30 * 24 * 60 * 60;

/** The collections whose records have their tokens revoked on request (src/admin/token-revocation.ts). */
const REVOKES_TOKENS = new Set(['clients', 'subjects']);

/** A destructive button acts on its second click: the first arms it and says what the next one does. */
function armed(button: HTMLButtonElement, confirmation: string): boolean {
  if (button.dataset.armed === 'true') return true;
  button.dataset.armed = 'true';
  button.textContent = confirmation;
  return false;
}

/** What a write of this collection needs (src/admin/roles.ts): the console offers "New" only to a key that has it. */
function permissionToWrite(definition: CollectionDefinition): string {
  return POLICY_COLLECTIONS.has(definition.path) ? 'author-policy' : 'operate';
}

/** "More settings", and how many of them the record has set. */
function moreSettings(advanced: Field[], record?: AdminRecord): string {
  const set = advanced.filter((item) => record?.[item.name] !== undefined && record[item.name] !== null).length;
  return set > 0 ? `More settings (${set} set)` : 'More settings';
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
    focusTarget(item)?.focus();
    say(formStatus, `${outcome}: see ${humanize(item.name)}.`, 'error');
  } else say(formStatus, `${outcome}: ${message}`, 'error');
}

/**
 * What the API shows only in the answer that made it: an initial access token, or a client secret
 * the server generated. Shown here once, with a copy button; it is never read again.
 */
function shownOnce(definition: CollectionDefinition, saved: AdminRecord, key: string): HTMLElement | null {
  const [field, what] = definition.issuedToken
    ? [definition.issuedToken.shownAs, 'token']
    : [definition.hashedSecret?.shownAs, `client secret of ${key}`];
  const value = field ? saved[field] : undefined;
  if (typeof value !== 'string') return null;
  const copied = h('span', { class: 'hint', role: 'status' });
  const copy = h('button', { type: 'button', class: 'secondary' }, 'Copy');
  copy.addEventListener('click', () => {
    navigator.clipboard.writeText(value).then(
      () => (copied.textContent = 'Copied.'),
      () => (copied.textContent = 'The browser did not allow copying: select the text instead.'),
    );
  });
  return h(
    'div',
    { class: 'notice shown-once', role: 'alert' },
    h('p', { tabindex: -1 }, `Copy the ${what} now: it is shown only once.`),
    h('code', {}, value),
    h('div', { class: 'buttons' }, copy, copied),
  );
}

function summaryColumns(definition: CollectionDefinition): string[] {
  if (definition.console?.columns) return definition.console.columns;
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
