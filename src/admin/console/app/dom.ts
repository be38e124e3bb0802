/** A tiny element builder: text is always set as text (never as HTML), so no value can inject markup. */

export type Child = Node | string | number | null | undefined | false;
type Props = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

/** Properties set as DOM properties rather than attributes (they are live state, not markup). */
const PROPERTIES = new Set(['value', 'checked', 'selected']);

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === 'function') element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (PROPERTIES.has(name)) (element as unknown as Record<string, unknown>)[name] = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, ...children);
  return element;
}

export function append(parent: Element, ...children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces an element's content. */
export function replace(parent: Element, ...children: (Child | Child[])[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}

let counter = 0;
/** A document-unique id for label/field/error associations. */
export function uniqueId(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** "identity-providers" or "clientSecret" → "Identity providers" / "Client secret". */
export function humanize(name: string): string {
  const words = name
    .replace(/[-_]/g, ' ')
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .replace(/\buri(s?)\b/g, 'URI$1')
    .replace(/\bid\b/g, 'ID')
    .replace(/\bidp\b/g, 'IdP')
    .replace(/\bjwks\b/g, 'JWKS');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A polite live region whose text screen readers announce. */
export function statusLine(): HTMLParagraphElement {
  return h('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
}

export function say(line: Element, text: string, tone: 'info' | 'ok' | 'error' = 'info'): void {
  line.className = `status ${tone}`;
  line.textContent = text;
}

/**
 * Marks a table to be shown as one card per row on narrow screens (console.css, `table.cards`):
 * each cell is labelled with its column's header, and the table's roles are set explicitly, since
 * some browsers drop a table's semantics once its layout is no longer a table's.
 */
export function asCards(table: HTMLTableElement): HTMLTableElement {
  table.classList.add('cards');
  table.setAttribute('role', 'table');
  const headers = [...(table.tHead?.rows[0]?.cells ?? [])].map((cell) => cell.textContent ?? '');
  for (const group of [table.tHead, ...table.tBodies]) group?.setAttribute('role', 'rowgroup');
  for (const row of table.rows) {
    row.setAttribute('role', 'row');
    [...row.cells].forEach((cell, index) => {
      const header = cell.tagName === 'TH';
      if (header) cell.setAttribute('role', cell.getAttribute('scope') === 'row' ? 'rowheader' : 'columnheader');
      else cell.setAttribute('role', 'cell');
      if (!header || cell.getAttribute('scope') === 'row') cell.dataset.label = headers[index] ?? '';
    });
  }
  return table;
}

/** A stored time as operators compare it with logs and other nodes: 24-hour, in UTC, "2026-11-27 17:52:30 UTC". */
export function utcTime(iso: string): string {
  const time = new Date(iso);
  return Number.isNaN(time.getTime()) ? iso : `${time.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/**
 * An async event handler where the DOM takes a void one. The handlers show their own failures on
 * the page; anything that still escapes one is reported as the browser reports an uncaught error.
 */
export function detached<E>(handler: (event: E) => Promise<unknown>): (event: E) => void {
  return (event) => void handler(event).catch(reportError);
}
