import { ApiError, api } from '../api.js';
import { asCards, detached, h, replace, say, statusLine } from '../dom.js';
import { pagedList } from '../paged-list.js';
import { session } from '../session.js';

export interface Tenant {
  id: string;
  createdAt: string;
  configured: boolean;
}

/**
 * The tenants (GET /admin/api/tenants): searched and paged, each with a button that makes it the
 * console's tenant; and, for a key that may write, a form that creates one.
 */
export function tenantsPage(
  main: HTMLElement,
  switchTo: (tenant: string) => void,
  created: (tenant: string) => void,
): void {
  const status = statusLine();
  const list = pagedList<Tenant>({
    path: '/tenants',
    noun: 'tenants',
    searchesIn: 'tenant id',
    table,
    empty: 'No tenant but the default one yet.',
    status,
  });

  function table(tenants: Tenant[], caption: string): HTMLElement {
    return asCards(tenantTable(tenants, caption));
  }

  function tenantTable(tenants: Tenant[], caption: string): HTMLTableElement {
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
          ['Tenant', 'Created', 'Origin', 'Actions'].map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h(
        'tbody',
        {},
        tenants.map((tenant) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row' }, tenant.id),
            h('td', {}, tenant.createdAt.replace('T', ' ').slice(0, 19)),
            h('td', {}, tenant.configured ? 'configuration (TENANTS)' : 'Admin API'),
            h(
              'td',
              { class: 'actions' },
              session.tenant() === tenant.id
                ? h('span', {}, 'Shown now')
                : h(
                    'button',
                    {
                      type: 'button',
                      'aria-label': `Switch to ${tenant.id}`,
                      onclick: () => switchTo(tenant.id),
                    },
                    'Switch to',
                  ),
            ),
          ),
        ),
      ),
    );
  }

  function createForm(): HTMLElement {
    const id = h('input', {
      id: 'new-tenant-id',
      name: 'id',
      type: 'text',
      required: true,
      autocomplete: 'off',
      maxlength: 64,
      'aria-describedby': 'new-tenant-hint',
    });
    const formStatus = statusLine();
    const form = h(
      'form',
      { novalidate: true, 'aria-labelledby': 'new-tenant-title', class: 'record-form' },
      h('h3', { id: 'new-tenant-title' }, 'New tenant'),
      h(
        'div',
        { class: 'field' },
        h('label', { for: id.id }, 'Tenant ID'),
        id,
        h(
          'p',
          { class: 'hint', id: 'new-tenant-hint' },
          'What clients send as X-Tenant-Id: 1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit.',
        ),
      ),
      formStatus,
      h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Create tenant')),
    );
    const create = async (event: SubmitEvent) => {
      event.preventDefault();
      say(formStatus, '');
      try {
        const made = await api<Tenant>('POST', '/tenants', { id: id.value.trim() });
        say(status, `Created tenant ${made.id}.`, 'ok');
        created(made.id);
        id.value = '';
        // Tenants go by id, so a new one may be on any page: the list is searched for it.
        await list.searchFor(made.id);
      } catch (error) {
        const message = error instanceof ApiError ? error.message : (error as Error).message;
        say(formStatus, `Not created: ${message}`, 'error');
        id.setAttribute('aria-invalid', 'true');
        id.focus();
      }
    };
    form.addEventListener('submit', detached(create));
    return form;
  }

  replace(
    main,
    h('h2', { tabindex: -1 }, 'Tenants'),
    h(
      'p',
      {},
      'Each tenant has its own clients, users, resources, policy and audit log. The default tenant is the one requests without X-Tenant-Id use.',
    ),
    session.may('operate') ? createForm() : null,
    status,
    list.element,
  );
}
