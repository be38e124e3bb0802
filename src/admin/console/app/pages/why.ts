import { api } from '../api.js';
import { h, replace, utcTime } from '../dom.js';
import { explainReplay, type Replay } from '../explain.js';

interface AuditEntry {
  id: number;
  createdAt: string;
  method: string;
  endpoint: string;
  outcome: string;
  clientId: string | null;
  subjectId: string | null;
}

/**
 * The explanation of one audit entry (#/why/<id>), the page the decisions listed by impact
 * analysis and the shadow policy link to: the entry, its decision then, the same input decided by
 * the policy in force now, and why (each engine's rules and policies).
 */
export function whyPage(main: HTMLElement, id: string): void {
  const body = h('div', {}, h('p', { role: 'status' }, `Replaying entry ${id}…`));
  replace(main, h('h2', { tabindex: -1 }, `Why? Audit entry ${id}`), body);
  if (!/^\d{1,15}$/.test(id)) {
    replace(body, h('p', { class: 'status error' }, 'No such audit entry.'));
    return;
  }
  void Promise.all([api<AuditEntry>('GET', `/audit-logs/${id}`), api<Replay>('POST', `/audit-logs/${id}/replay`)]).then(
    ([entry, replay]) =>
      replace(
        body,
        h(
          'p',
          {},
          `${entry.method} ${entry.endpoint} at ${utcTime(entry.createdAt)}, client ${entry.clientId ?? '(none)'}, subject ${entry.subjectId ?? '(none)'}: ${entry.outcome}.`,
        ),
        explainReplay(replay),
        h('p', {}, h('a', { href: '#/policy-changes' }, 'Back to policy changes')),
      ),
    (error: unknown) => replace(body, h('p', { class: 'status error' }, (error as Error).message)),
  );
}
