import './console.css';
import { COLLECTIONS } from '../../../catalog/collections.js';
import { apiList, callerOfKey, whenUnauthorized } from './api.js';
import { h, humanize, replace } from './dom.js';
import { healthNotice } from './health.js';
import { apiKeysPage } from './pages/api-keys.js';
import { auditPage } from './pages/audit.js';
import { collectionPage } from './pages/collection.js';
import { overviewPage } from './pages/overview.js';
import { policyChangesPage } from './pages/policy-changes.js';
import { signalsPage } from './pages/signals.js';
import { whyPage } from './pages/why.js';
import { playgroundPage } from './pages/playground.js';
import { signInPage } from './pages/sign-in.js';
import { tenantsPage, type Tenant } from './pages/tenants.js';
import { SESSION_SIGN_IN, session } from './session.js';

type Page = { route: string; title: string; render: (main: HTMLElement) => void };

/** The console's pages by hash route (#/clients …): navigation never puts anything secret in a URL. */
const PAGES: [Page, ...Page[]] = [
  { route: 'overview', title: 'Overview', render: overviewPage },
  ...COLLECTIONS.map((definition) => ({
    route: definition.path,
    title: humanize(definition.path),
    render: (main: HTMLElement) => collectionPage(main, definition),
  })),
  { route: 'audit-logs', title: 'Audit log', render: auditPage },
  { route: 'playground', title: 'Decision playground', render: playgroundPage },
  { route: 'policy-changes', title: 'Policy changes', render: policyChangesPage },
  { route: 'signals', title: 'Shared Signals', render: signalsPage },
  { route: 'api-keys', title: 'API keys', render: apiKeysPage },
  {
    route: 'tenants',
    title: 'Tenants',
    render: (main: HTMLElement) => tenantsPage(main, switchTenant, (tenant) => offerTenant(tenant)),
  },
];

/** How many tenants the banner's choice lists; the Tenants page searches them all. */
const TENANT_CHOICES = 100;

const root = document.getElementById('app')!;

function start(): void {
  whenUnauthorized(() => {
    session.signOut();
    signInPage(root, showCurrentPage, 'The Admin API key was refused: sign in again.');
  });
  window.addEventListener('hashchange', () => session.key() && showCurrentPage());
  // Back from the identity provider: the session cookie is set; the address loses the marker.
  const url = new URL(location.href);
  if (url.searchParams.get('signed-in') === 'session') {
    session.signIn(SESSION_SIGN_IN);
    history.replaceState(null, '', `${url.pathname}${url.hash}`);
  }
  if (session.key()) {
    showCurrentPage();
    // A tab signed in before the console asked whose key it holds: ask now, for the banner and the
    // pages. A session cookie is asked about at every load: the browser may hold another one by now.
    if (!session.caller() || session.key() === SESSION_SIGN_IN)
      void callerOfKey().then((caller) => caller && (session.rememberCaller(caller), showCurrentPage()));
  } else signInPage(root, showCurrentPage);
}

/** Pages reached by a link rather than the navigation (#/why/42), and the navigation entry they belong under. */
const LINKED_PAGES: {
  prefix: string;
  title: string;
  under: string;
  render: (main: HTMLElement, argument: string) => void;
}[] = [{ prefix: 'why/', title: 'Why?', under: 'audit-logs', render: whyPage }];

function showCurrentPage(): void {
  const route = location.hash.replace(/^#\/?/, '');
  const linked = LINKED_PAGES.find((candidate) => route.startsWith(candidate.prefix));
  const page = linked
    ? {
        route: linked.under,
        title: linked.title,
        render: (main: HTMLElement) => linked.render(main, route.slice(linked.prefix.length)),
      }
    : (PAGES.find((candidate) => candidate.route === route) ?? PAGES[0]);
  const main = h('main', { id: 'main', tabindex: -1 });
  replace(
    root,
    h('a', { class: 'skip', href: '#main', onclick: skipToMain }, 'Skip to content'),
    banner(),
    healthNotice(),
    h('div', { class: 'layout' }, navigation(page.route), main),
  );
  document.title = `${page.title} · Arbiter console`;
  page.render(main);
  main.querySelector('h2')?.focus();
}

/** The skip link moves focus without touching the hash (the hash is the page route). */
function skipToMain(event: Event): void {
  event.preventDefault();
  document.getElementById('main')?.focus();
}

function navigation(current: string): HTMLElement {
  return h(
    'nav',
    { 'aria-label': 'Main' },
    h(
      'ul',
      {},
      PAGES.map((page) =>
        h(
          'li',
          {},
          h('a', { href: `#/${page.route}`, 'aria-current': page.route === current ? 'page' : undefined }, page.title),
        ),
      ),
    ),
  );
}

/** A tenant just created joins the banner's choice. */
function offerTenant(tenant: string): void {
  document.getElementById('tenant')?.append(h('option', { value: tenant }, tenant));
}

function switchTenant(tenant: string): void {
  session.switchTenant(tenant);
  showCurrentPage();
}

/** The tenant the pages show, chosen among the tenants that exist (GET /tenants), and the way to switch. */
function tenantSwitcher(): HTMLElement {
  const current = session.tenant();
  const tenant = h(
    'select',
    { id: 'tenant', name: 'tenant', 'aria-describedby': 'tenant-hint' },
    h('option', { value: '', selected: current === '' }, 'Default tenant'),
    current ? h('option', { value: current, selected: true }, current) : null,
  );
  const hint = h(
    'span',
    { class: 'hint', id: 'tenant-hint' },
    current ? `Showing tenant ${current}` : 'Showing the default tenant',
  );
  void apiList<Tenant>('/tenants', { limit: String(TENANT_CHOICES) })
    .then((page) => {
      tenant.append(
        ...page.items.filter((each) => each.id !== current).map((each) => h('option', { value: each.id }, each.id)),
      );
      if (page.total > page.items.length)
        hint.textContent += ` (the first ${page.items.length} of ${page.total} are listed: find the others on the Tenants page)`;
      tenant.dataset.loaded = 'true';
    })
    .catch(() => undefined);
  const switcher = h(
    'form',
    { class: 'tenant-switcher', 'aria-label': 'Tenant switcher' },
    h('label', { for: tenant.id }, 'Tenant'),
    tenant,
    h('button', { type: 'submit' }, 'Switch'),
    hint,
  );
  switcher.addEventListener('submit', (event) => {
    event.preventDefault();
    switchTenant(tenant.value);
  });
  return switcher;
}

function banner(): HTMLElement {
  const switcher = tenantSwitcher();
  const caller = session.caller();
  const signedInAs = caller && h('span', { class: 'signed-in-as' }, `Signed in as ${caller.name} (${caller.role})`);
  const signOut = h(
    'button',
    { type: 'button', class: 'secondary', onclick: () => (session.signOut(), signInPage(root, showCurrentPage)) },
    'Sign out',
  );
  return h('header', { class: 'banner' }, h('h1', {}, 'Arbiter console'), switcher, signedInAs, signOut);
}

start();
