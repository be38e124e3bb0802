import { h, type Child } from './dom.js';

/** What POST /admin/api/decisions answers (and a replay's `now`). */
export interface DecisionAnswer {
  point: string;
  decision: Record<string, unknown> & { allow?: boolean; error?: string; error_description?: string };
  engineError?: string;
  engines?: {
    rego?: { verdict: string; rules?: { rule: string; location?: unknown }[]; reason?: string; trace?: string[] };
    cedar?: { verdict: string; policies?: { id: string; text?: string }[]; reason?: string; errors?: string[] };
  };
  policyRevision?: { store: string; opa: string | null };
}

/**
 * What POST /admin/api/audit-logs/{id}/replay answers: one decision, or a list of them (in the
 * same order) for an entry that asked several (UMA permissions, AuthZEN batches).
 */
export interface Replay {
  entryId: number;
  point: string | string[];
  then: DecisionAnswer['decision'] | DecisionAnswer['decision'][];
  now: DecisionAnswer | DecisionAnswer[];
  changed: boolean;
  differences: { field: string; then: unknown; now: unknown }[];
}

/** A decision in words: allowed, or refused with the policy's error code and description. */
export function verdictLine(decision: DecisionAnswer['decision'] | null | undefined): string {
  if (!decision) return 'no decision';
  if (decision.allow)
    return `allowed${Array.isArray(decision.scopes) ? ` (scopes: ${decision.scopes.join(' ') || 'none'})` : ''}`;
  return `refused${decision.error ? `: ${decision.error}` : ''}${decision.error_description ? ` (${decision.error_description})` : ''}`;
}

/** The decision, then what each engine said and which rules or policies made it say so. */
export function explainDecision(answer: DecisionAnswer): HTMLElement {
  const rego = answer.engines?.rego;
  const cedar = answer.engines?.cedar;
  return h(
    'div',
    { class: 'explanation' },
    h(
      'p',
      { class: answer.decision.allow ? 'verdict allow' : 'verdict deny' },
      `Decision at ${answer.point}: ${verdictLine(answer.decision)}`,
    ),
    answer.engineError ? h('p', { class: 'engine-error' }, `Engine error: ${answer.engineError}`) : null,
    h(
      'dl',
      {},
      engine(
        'Rego (OPA)',
        rego?.verdict,
        rego?.reason,
        (rego?.rules ?? []).map((rule) =>
          h('li', {}, h('code', {}, rule.rule), rule.location ? ` at ${location(rule.location)}` : ''),
        ),
      ),
      engine('Cedar', cedar?.verdict, cedar?.reason, [
        ...(cedar?.policies ?? []).map((policy) =>
          h('li', {}, h('code', {}, policy.id), policy.text ? h('pre', {}, policy.text) : null),
        ),
        ...(cedar?.errors ?? []).map((error) => h('li', { class: 'engine-error' }, error)),
      ]),
    ),
    rego?.trace?.length
      ? h(
          'details',
          {},
          h('summary', {}, `OPA trace (${rego.trace.length} lines)`),
          h('pre', {}, rego.trace.join('\n')),
        )
      : null,
    answer.policyRevision
      ? h(
          'p',
          { class: 'hint' },
          `Policy bundle revision: store ${answer.policyRevision.store}, OPA ${answer.policyRevision.opa ?? '(none)'}.`,
        )
      : null,
    h('details', {}, h('summary', {}, 'Full decision (JSON)'), h('pre', {}, JSON.stringify(answer.decision, null, 2))),
  );
}

function engine(name: string, verdict: string | undefined, reason: string | undefined, items: Child[]): Child[] {
  return [
    h('dt', {}, name),
    h(
      'dd',
      {},
      h('span', { class: `engine-verdict ${verdict ?? 'none'}` }, verdict ?? 'not consulted'),
      reason ? ` — ${reason}` : '',
      items.length ? h('ul', {}, items) : null,
    ),
  ];
}

function location(value: unknown): string {
  if (typeof value === 'string') return value;
  const { file, row, col } = (value ?? {}) as { file?: string; row?: number; col?: number };
  return [file, row, col].filter((part) => part !== undefined).join(':');
}

/** "Why was this refused?": the audited decision, the same input decided again now, and what differs. */
export function explainReplay(replay: Replay): HTMLElement {
  const nows = Array.isArray(replay.now) ? replay.now : [replay.now];
  const thens = Array.isArray(replay.then) ? replay.then : [replay.then];
  return h(
    'div',
    { class: 'replay' },
    h(
      'p',
      {},
      `Audit entry ${replay.entryId} at ${[replay.point].flat().join(', ')}. Then: ${thens.map(verdictLine).join('; ')}.`,
    ),
    h(
      'p',
      {},
      replay.changed ? 'The policy in force now decides differently:' : 'The policy in force now decides the same.',
    ),
    replay.differences.length
      ? h(
          'table',
          {},
          h('caption', {}, 'Differences between then and now'),
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Field'),
              h('th', { scope: 'col' }, 'Then'),
              h('th', { scope: 'col' }, 'Now'),
            ),
          ),
          h(
            'tbody',
            {},
            replay.differences.map((difference) =>
              h(
                'tr',
                {},
                h('th', { scope: 'row' }, difference.field),
                h('td', {}, JSON.stringify(difference.then)),
                h('td', {}, JSON.stringify(difference.now)),
              ),
            ),
          ),
        )
      : null,
    h('h4', {}, 'Why, according to the engines now'),
    nows.map((now) => explainDecision(now)),
  );
}
