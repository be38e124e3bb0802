import { apiList, type ListPage } from './api.js';
import { h, replace, say, uniqueId } from './dom.js';

/** Records per page of a list in the console. */
export const PAGE_SIZE = 20;

export interface PagedListOptions<T> {
  /** The Admin API list, e.g. `/clients`. */
  path: string;
  /** What the list holds, plural and lower case ("clients"), for its captions and messages. */
  noun: string;
  /** What the search looks in ("client ID or client name"). */
  searchesIn: string;
  /** The table of one page; `caption` says which records it shows. */
  table(items: T[], caption: string): HTMLElement;
  /** Said when there are no records at all (no search). */
  empty: string;
  /** Where a failed read is said. */
  status: HTMLElement;
}

export interface PagedList {
  element: HTMLElement;
  /** Reads the current page again (after a write); steps back when the page became empty. */
  reload(): Promise<void>;
  /**
   * Shows the last page of the whole list, where a record just created is (lists go by ascending
   * id); past the count's cap (10,000), where the last page is not known, the record of `key`.
   */
  showLast(key?: string): Promise<void>;
  /** Searches for `text`, as if typed in the search box. */
  searchFor(text: string): Promise<void>;
}

/**
 * A list of an Admin API collection as the console shows every list: a search box (the API's `q`),
 * one page at a time with its position in the total (X-Total-Count), previous and next.
 */
export function pagedList<T>(options: PagedListOptions<T>): PagedList {
  let offset = 0;
  let search = '';
  const results = h('div', { class: 'list-area' });
  const inputId = uniqueId('search');
  const hintId = `${inputId}-hint`;
  const input = h('input', {
    id: inputId,
    type: 'search',
    name: 'q',
    maxlength: 200,
    autocomplete: 'off',
    'aria-describedby': hintId,
  });
  const form = h(
    'form',
    { class: 'list-search', role: 'search', 'aria-label': `Search ${options.noun}` },
    h('label', { for: inputId }, 'Search'),
    h('div', { class: 'search-row' }, input, h('button', { type: 'submit' }, 'Search')),
    h('p', { class: 'hint', id: hintId }, `Part of the ${options.searchesIn}; letters in any case.`),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    search = input.value.trim();
    offset = 0;
    void load();
  });

  async function load(): Promise<void> {
    try {
      let page = await fetchPage();
      if (page.items.length === 0 && offset > 0) {
        offset = Math.max(0, Math.floor((page.total - 1) / PAGE_SIZE) * PAGE_SIZE);
        page = await fetchPage();
      }
      replace(results, view(page));
    } catch (error) {
      say(options.status, (error as Error).message, 'error');
    }
  }

  function fetchPage(): Promise<ListPage<T>> {
    const query: Record<string, string> = { offset: String(offset), limit: String(PAGE_SIZE) };
    if (search) query.q = search;
    return apiList<T>(options.path, query);
  }

  function view(page: ListPage<T>): (HTMLElement | null)[] {
    if (page.total === 0 || page.items.length === 0)
      return [h('p', {}, search ? `No ${options.noun} match “${search}”.` : options.empty)];
    const first = offset + 1;
    const last = offset + page.items.length;
    const matching = search ? ` matching “${search}”` : '';
    const caption = `${capitalized(options.noun)}${matching}: ${first}–${last} of ${page.total}${page.capped ? '+' : ''}`;
    // A narrow screen scrolls the table, never the page; the region can be scrolled from the keyboard.
    const scroller = h('div', { class: 'table-scroll', tabindex: 0, role: 'region', 'aria-label': caption });
    scroller.append(options.table(page.items, caption));
    return [scroller, pager(page)];
  }

  function pager(page: ListPage<T>): HTMLElement | null {
    if (offset === 0 && !page.hasNext) return null;
    const pages = Math.max(1, Math.ceil(page.total / PAGE_SIZE));
    const current = Math.floor(offset / PAGE_SIZE) + 1;
    return h(
      'nav',
      { class: 'pager', 'aria-label': `Pages of ${options.noun}` },
      h('button', { type: 'button', disabled: offset === 0, onclick: () => turn(-1) }, 'Previous page'),
      h('span', {}, `Page ${current} of ${pages}${page.capped ? '+' : ''}`),
      h('button', { type: 'button', disabled: !page.hasNext, onclick: () => turn(1) }, 'Next page'),
    );
  }

  function turn(by: number): void {
    offset = Math.max(0, offset + by * PAGE_SIZE);
    void load();
  }

  async function showLast(key?: string): Promise<void> {
    search = '';
    input.value = '';
    try {
      const { total, capped } = await apiList<T>(options.path, { limit: '1' });
      // Past the count's cap the last page is not known: the record just made is found by its key.
      if (capped && key) return await searchFor(key);
      offset = Math.max(0, Math.floor((total - 1) / PAGE_SIZE) * PAGE_SIZE);
    } catch {
      offset = 0;
    }
    await load();
  }

  async function searchFor(text: string): Promise<void> {
    input.value = text;
    search = text;
    offset = 0;
    await load();
  }

  void load();
  return { element: h('div', { class: 'paged-list' }, form, results), reload: load, showLast, searchFor };
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
