import { api } from '../api.js';
import { h, replace, say, statusLine, uniqueId } from '../dom.js';

/** A version as GET …/{id}/history lists it. */
interface Version {
  number: number;
  action: string;
  at: string;
  rolledBackTo?: number;
  deleted: boolean;
}

interface VersionDiff {
  from: number;
  to: number | 'current';
  changes: { field: string; from: unknown; to: unknown }[];
  diff: string;
}

/**
 * The versions of one policy rule or data entry (GET /admin/api/{collection}/{id}/history): each
 * compared with the record as it is now, and rolled back in one call after a confirmation (the
 * server checks a rollback like any change, so one to a policy that can no longer decide is
 * refused with the engine's error). `changed` runs after a rollback (the list, the served revision).
 */
export function historyPanel(collection: string, id: number, label: string, changed: () => Promise<void>): HTMLElement {
  const headingId = uniqueId('history-title');
  const status = statusLine();
  const list = h('div', { class: 'history-list' });
  const comparison = h('div', { class: 'comparison' });
  const base = `/${collection}/${id}/history`;

  async function load(): Promise<void> {
    try {
      const versions = await api<Version[]>('GET', base);
      replace(
        list,
        versions.length ? table(versions) : h('p', {}, 'No versions recorded yet: the first change starts them.'),
      );
    } catch (error) {
      say(status, (error as Error).message, 'error');
    }
  }

  function table(versions: Version[]): HTMLElement {
    return h(
      'table',
      {},
      h('caption', {}, `Versions of ${label}, newest first`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Version', 'Change', 'When', 'Actions'].map((title) => h('th', { scope: 'col' }, title)),
        ),
      ),
      h(
        'tbody',
        {},
        versions.map((version) =>
          h(
            'tr',
            { 'data-version': version.number },
            h('th', { scope: 'row' }, String(version.number)),
            h('td', {}, describe(version)),
            h('td', {}, new Date(version.at).toLocaleString()),
            h('td', { class: 'actions' }, version.deleted ? null : actions(version)),
          ),
        ),
      ),
    );
  }

  function actions(version: Version): HTMLElement[] {
    const compare = h(
      'button',
      { type: 'button', class: 'secondary', 'aria-label': `Compare version ${version.number} with the current one` },
      'Compare',
    );
    compare.addEventListener('click', () => void showDiff(version.number));
    const rollBack = h(
      'button',
      { type: 'button', class: 'danger', 'aria-label': `Roll back to version ${version.number}` },
      'Roll back',
    );
    rollBack.addEventListener('click', () => void confirmThenRollBack(rollBack, version.number));
    return [compare, rollBack];
  }

  async function showDiff(number: number): Promise<void> {
    try {
      const found = await api<VersionDiff>('GET', `${base}/${number}/diff`);
      replace(
        comparison,
        h('h4', {}, `Version ${number} compared with the current one`),
        found.diff || found.changes.length ? null : h('p', {}, 'No difference.'),
        found.changes.length
          ? h(
              'ul',
              {},
              found.changes.map((change) =>
                h('li', {}, `${change.field}: ${JSON.stringify(change.from)} → ${JSON.stringify(change.to)}`),
              ),
            )
          : null,
        found.diff ? diffView(found.diff) : null,
      );
    } catch (error) {
      say(status, (error as Error).message, 'error');
    }
  }

  /** Two steps, as a delete: the first click asks, the second rolls back. */
  async function confirmThenRollBack(button: HTMLButtonElement, number: number): Promise<void> {
    if (button.dataset.armed !== 'true') {
      button.dataset.armed = 'true';
      button.textContent = 'Confirm roll back';
      return;
    }
    try {
      await api('POST', `${base}/${number}/rollback`);
      say(status, `Rolled back to version ${number}.`, 'ok');
      replace(comparison);
      await load();
      await changed();
    } catch (error) {
      say(status, `Not rolled back: ${(error as Error).message}`, 'error');
      button.dataset.armed = 'false';
      button.textContent = 'Roll back';
    }
  }

  void load();
  return h(
    'section',
    { class: 'history', 'aria-labelledby': headingId },
    h('h3', { id: headingId, tabindex: -1 }, `History of ${label}`),
    status,
    list,
    comparison,
  );
}

function describe(version: Version): string {
  if (version.action === 'rollback') return `rolled back to version ${version.rolledBackTo}`;
  if (version.action === 'baseline') return 'as it was before the first recorded change';
  return version.action === 'delete' ? 'deleted' : `${version.action}d`;
}

/** A unified diff, each line marked as added, removed or a hunk header (by class, and by its first character). */
function diffView(diff: string): HTMLElement {
  return h(
    'pre',
    { class: 'diff', 'aria-label': 'Differences, unified diff' },
    diff
      .replace(/\n$/, '')
      .split('\n')
      .map((line) =>
        h(
          'span',
          {
            class: line.startsWith('@@')
              ? 'hunk'
              : line.startsWith('+') && !line.startsWith('+++')
                ? 'added'
                : line.startsWith('-') && !line.startsWith('---')
                  ? 'removed'
                  : 'kept',
          },
          `${line}\n`,
        ),
      ),
  );
}
