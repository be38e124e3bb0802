import { api } from '../api.js';
import { asCards, detached, h, replace, say, statusLine, uniqueId, utcTime } from '../dom.js';
import { explainReplay, type Replay } from '../explain.js';
import { isSharedPart, joinShared } from '../../../../policy/contract/shared-part.js';
import { openInPlayground } from './playground.js';

interface AuditEntry {
  id: number;
  createdAt: string;
  method: string;
  endpoint: string;
  outcome: string;
  clientId: string | null;
  subjectId: string | null;
  policyDecision: unknown;
  policyInput: unknown;
  /** An aggregated entry counts refused requests of one address (kind 'aggregated'): how many, and their statuses. */
  requestSummary: { status?: number; error?: string; kind?: string; count?: number; statuses?: Record<string, number> };
}

interface AuditPage {
  content: AuditEntry[];
  totalElements: number;
  totalPages: number;
  number: number;
  size: number;
  /** Counting stopped at totalElements: more match. */
  totalElementsCapped?: boolean;
  /** Where the next page starts (absent from a server older than this console). */
  nextCursor?: string | null;
}

const PAGE_SIZE = 20;

/** The audit log of the chosen tenant, newest first, filtered by endpoint, client and outcome, with "Why?" on decisions. */
export function auditPage(main: HTMLElement): void {
  const status = statusLine();
  const results = h('div', { class: 'list-area' });
  const why = h('section', { class: 'why', 'aria-label': 'Why' });
  const endpoint = labelled('Endpoint', h('input', { type: 'text', name: 'endpoint', placeholder: '/token' }));
  const clientId = labelled('Client ID', h('input', { type: 'text', name: 'clientId' }));
  const outcome = labelled(
    'Outcome',
    h(
      'select',
      { name: 'outcome' },
      [
        ['', 'Any'],
        ['allow', 'Allowed'],
        ['deny', 'Denied'],
        ['error', 'Error'],
      ].map(([value, text]) => h('option', { value }, text)),
    ),
  );
  // Times as the table shows them: UTC, 24-hour ISO 8601 (a time typed without its zone is taken as UTC).
  const from = labelled('From (UTC)', h('input', { type: 'text', name: 'from', placeholder: '2026-11-27T09:00' }));
  const to = labelled('To (UTC)', h('input', { type: 'text', name: 'to', placeholder: '2026-11-27T10:00' }));
  // The console's own page loads are left out unless asked for: what operators did stays in view.
  const consoleReads = h('input', { type: 'checkbox', id: uniqueId('filter'), name: 'consoleReads' });
  let page = 0;
  /**
   * Where each page shown so far started (the previous page's nextCursor; undefined: by number), so
   * that a page deep in a large log is read where the last one ended rather than after skipping
   * every entry before it, and "Previous page" goes back to where it was.
   */
  let starts: (string | undefined)[] = [undefined];
  /** The latest load: an earlier one that answers later (the first page under a slow server) must not overwrite it. */
  let latest = 0;

  async function load(): Promise<void> {
    const mine = ++latest;
    const query = new URLSearchParams({ page: String(page), size: String(PAGE_SIZE), sort: 'id,desc' });
    const cursor = starts[page];
    if (cursor) query.set('cursor', cursor);
    if (endpoint.input.value.trim()) query.set('endpoint', endpoint.input.value.trim());
    if (clientId.input.value.trim()) query.set('clientId', clientId.input.value.trim());
    if (outcome.input.value) query.set('outcome', outcome.input.value);
    for (const [name, field] of [
      ['from', from],
      ['to', to],
    ] as const)
      if (field.input.value.trim()) query.set(name, asUtc(field.input.value.trim()));
    if (!consoleReads.checked) query.set('hideConsoleReads', 'true');
    try {
      const found = await api<AuditPage>('GET', `/audit-logs?${query}`);
      if (mine !== latest) return;
      starts[page + 1] = found.nextCursor ?? undefined;
      replace(results, table(found), pager(found));
      say(status, `${totalOf(found)} entries.`);
    } catch (error) {
      if (mine === latest) say(status, (error as Error).message, 'error');
    }
  }

  function table(found: AuditPage): HTMLElement {
    if (found.content.length === 0) return h('p', {}, 'No entries match.');
    const caption = `Audit entries, page ${found.number + 1} of ${pagesOf(found)}`;
    const scroller = h('div', { class: 'table-scroll', tabindex: 0, role: 'region', 'aria-label': caption });
    scroller.append(asCards(auditTable(found, caption)));
    return scroller;
  }

  function auditTable(found: AuditPage, caption: string): HTMLTableElement {
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
          ['Id', 'Time (UTC)', 'Request', 'Outcome', 'Status', 'Client', 'Subject', 'Decision'].map((name) =>
            h('th', { scope: 'col' }, name),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        found.content.map((entry) => row(entry)),
      ),
    );
  }

  function row(entry: AuditEntry): HTMLElement {
    const summary = entry.requestSummary ?? {};
    return h(
      'tr',
      { 'data-entry': entry.id },
      h('th', { scope: 'row' }, String(entry.id)),
      h('td', {}, utcTime(entry.createdAt)),
      h('td', { class: 'wrap' }, `${entry.method} ${entry.endpoint}`),
      h('td', { class: `outcome ${entry.outcome}` }, entry.outcome),
      h('td', {}, statusOf(summary)),
      h('td', {}, entry.clientId ?? ''),
      h('td', {}, entry.subjectId ?? ''),
      h(
        'td',
        {},
        entry.policyDecision
          ? h(
              'button',
              { type: 'button', 'aria-label': `Why? (entry ${entry.id})`, onclick: detached(() => explain(entry)) },
              'Why?',
            )
          : '',
      ),
    );
  }

  async function explain(entry: AuditEntry): Promise<void> {
    const id = entry.id;
    replace(why, h('p', { role: 'status' }, `Replaying entry ${id}…`));
    try {
      const replay = await api<Replay>('POST', `/audit-logs/${id}/replay`);
      // The playground takes one decision: the first of an entry that asked several.
      const [point] = [replay.point].flat();
      const [input] = isSharedPart(entry.policyInput) ? joinShared(entry.policyInput) : [entry.policyInput].flat();
      const tryIt = h(
        'button',
        { type: 'button', class: 'secondary', onclick: () => openInPlayground(point!, input) },
        'Open this input in the playground',
      );
      replace(why, h('h3', { tabindex: -1 }, `Why? Entry ${id}`), explainReplay(replay), tryIt);
    } catch (error) {
      replace(
        why,
        h('h3', { tabindex: -1 }, `Why? Entry ${id}`),
        h('p', { class: 'status error' }, (error as Error).message),
      );
    }
    why.querySelector('h3')?.focus();
  }

  function pager(found: AuditPage): HTMLElement {
    const previous = h(
      'button',
      { type: 'button', disabled: found.number === 0, onclick: () => turn(-1) },
      'Previous page',
    );
    const next = h('button', { type: 'button', disabled: !hasNext(found), onclick: () => turn(1) }, 'Next page');
    return h(
      'nav',
      { class: 'pager', 'aria-label': 'Audit pages' },
      previous,
      h('span', {}, `Page ${found.number + 1} of ${pagesOf(found)}`),
      next,
    );
  }

  function turn(by: number): void {
    page = Math.max(0, page + by);
    void load();
  }

  const filters = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter the audit log' },
    endpoint.wrapper,
    clientId.wrapper,
    outcome.wrapper,
    from.wrapper,
    to.wrapper,
    h(
      'div',
      { class: 'field field-boolean' },
      consoleReads,
      h('label', { for: consoleReads.id }, "Include the console's own reads"),
    ),
    h('button', { type: 'submit' }, 'Filter'),
  );
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    page = 0;
    starts = [undefined];
    void load();
  });
  replace(main, h('h2', { tabindex: -1 }, 'Audit log'), filters, status, results, why);
  void load();
}

/** A date and time typed without its zone ("2026-11-27 09:00") is UTC, as the table's times are; anything else goes as typed (the API says what it takes). */
function asUtc(text: string): string {
  const iso = text.replace(' ', 'T');
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(iso) ? `${iso}Z` : iso;
}

/** "10,000+" when the server stopped counting there. */
function totalOf(found: AuditPage): string {
  return `${found.totalElements.toLocaleString('en')}${found.totalElementsCapped ? '+' : ''}`;
}

function pagesOf(found: AuditPage): string {
  return `${Math.max(found.totalPages, 1).toLocaleString('en')}${found.totalElementsCapped ? '+' : ''}`;
}

function hasNext(found: AuditPage): boolean {
  return found.nextCursor === undefined ? found.number + 1 < found.totalPages : found.nextCursor !== null;
}

/** "400 invalid_request", or for an aggregated entry "400 ×1980 (aggregated)". */
function statusOf(summary: AuditEntry['requestSummary']): string {
  if (summary.kind !== 'aggregated') return [summary.status, summary.error].filter(Boolean).join(' ');
  return `${Object.keys(summary.statuses ?? {}).join(', ')} ×${summary.count ?? 0} (aggregated)`;
}

function labelled<T extends HTMLInputElement | HTMLSelectElement>(label: string, input: T) {
  input.id = uniqueId('filter');
  return { input, wrapper: h('div', { class: 'field' }, h('label', { for: input.id }, label), input) };
}
