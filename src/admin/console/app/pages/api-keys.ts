import { ADMIN_ROLES } from '../../../roles.js';
import { ApiError, api } from '../api.js';
import { asCards, detached, h, replace, say, statusLine } from '../dom.js';
import { pagedList } from '../paged-list.js';
import { session } from '../session.js';

interface ApiKey {
  id: number;
  name: string;
  role: string;
  description?: string;
  createdAt: string;
  createdBy: { id: number | null; name: string };
}

const ROLE_HINTS: Record<string, string> = {
  'read-only': 'reads everything, changes nothing',
  operator: 'also writes everything but policy rules, policy data and keys',
  'policy-author': 'reads, and writes policy rules and policy data',
  admin: 'everything, keys included',
};

/** The named Admin API keys: list, create (the key shown once) and revoke; the last two for admins only. */
export function apiKeysPage(main: HTMLElement): void {
  const status = statusLine();
  const created = h('div', { class: 'created-key' });
  const manages = session.may('manage-keys');
  const list = pagedList<ApiKey>({
    path: '/api-keys',
    noun: 'keys',
    searchesIn: 'name or description',
    table,
    empty: 'No named keys yet: only SERVICE_ADMIN_API_KEY (bootstrap) works.',
    status,
  });
  const load = () => list.reload();

  function table(keys: ApiKey[], caption: string): HTMLElement {
    return asCards(keyTable(keys, caption));
  }

  function keyTable(keys: ApiKey[], caption: string): HTMLTableElement {
    return h(
      'table',
      {},
      h('caption', {}, caption),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Name', 'Role', 'Description', 'Created', 'Created by'].map((title) => h('th', { scope: 'col' }, title)),
          manages && h('th', { scope: 'col' }, 'Actions'),
        ),
      ),
      h(
        'tbody',
        {},
        keys.map((key) => row(key)),
      ),
    );
  }

  function row(key: ApiKey): HTMLElement {
    const revoke = h('button', { type: 'button', class: 'danger', 'aria-label': `Revoke ${key.name}` }, 'Revoke');
    revoke.addEventListener('click', () => void confirmThenRevoke(revoke, key));
    return h(
      'tr',
      {},
      h('th', { scope: 'row' }, key.name),
      h('td', {}, key.role),
      h('td', {}, key.description ?? ''),
      h('td', {}, key.createdAt.replace('T', ' ').slice(0, 19)),
      h('td', {}, key.createdBy.name),
      manages && h('td', { class: 'actions' }, revoke),
    );
  }

  /** Two steps, as deletes elsewhere: the first click asks, the second revokes. */
  async function confirmThenRevoke(button: HTMLButtonElement, key: ApiKey): Promise<void> {
    if (button.dataset.armed !== 'true') {
      button.dataset.armed = 'true';
      button.textContent = 'Confirm revoke';
      return;
    }
    try {
      await api('DELETE', `/api-keys/${key.id}`);
      say(status, `Revoked ${key.name}: it is refused from now on.`, 'ok');
      await load();
    } catch (error) {
      say(status, (error as Error).message, 'error');
    }
  }

  function createForm(): HTMLElement {
    const name = h('input', { id: 'new-key-name', name: 'name', type: 'text', required: true, autocomplete: 'off' });
    const role = h(
      'select',
      { id: 'new-key-role', name: 'role' },
      ADMIN_ROLES.map((each) => h('option', { value: each }, `${each}: ${ROLE_HINTS[each]}`)),
    );
    const description = h('input', { id: 'new-key-description', name: 'description', type: 'text' });
    const formStatus = statusLine();
    const form = h(
      'form',
      { novalidate: true, 'aria-labelledby': 'new-key-title', class: 'record-form' },
      h('h3', { id: 'new-key-title' }, 'New key'),
      h('div', { class: 'field' }, h('label', { for: name.id }, 'Name'), name),
      h('div', { class: 'field' }, h('label', { for: role.id }, 'Role'), role),
      h('div', { class: 'field' }, h('label', { for: description.id }, 'Description (optional)'), description),
      formStatus,
      h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Create key')),
    );
    const create = async (event: SubmitEvent) => {
      event.preventDefault();
      say(formStatus, '');
      const body = {
        name: name.value.trim(),
        role: role.value,
        ...(description.value ? { description: description.value } : {}),
      };
      try {
        const made = await api<ApiKey & { key: string }>('POST', '/api-keys', body);
        replace(
          created,
          h(
            'div',
            { class: 'notice', role: 'alert' },
            h('p', {}, `Copy the key of ${made.name} (${made.role}) now: it is shown only once.`),
            h('code', {}, made.key),
          ),
        );
        name.value = '';
        description.value = '';
        await list.showLast();
      } catch (error) {
        const message = error instanceof ApiError ? error.message : (error as Error).message;
        say(formStatus, `Not created: ${message}`, 'error');
        (error instanceof ApiError && error.field === 'role' ? role : name).focus();
      }
    };
    form.addEventListener('submit', detached(create));
    return form;
  }

  const caller = session.caller();
  replace(
    main,
    h('h2', { tabindex: -1 }, 'API keys'),
    h(
      'p',
      {},
      'Keys for the Admin API and this console, each with a role. A key is shown once, when it is made; the server keeps only its digest.',
    ),
    manages
      ? createForm()
      : h('p', { class: 'hint' }, `Your key's role (${caller?.role ?? 'unknown'}) cannot create or revoke keys.`),
    created,
    status,
    list.element,
  );
}
