import { ApiError, api } from '../api.js';
import { asCards, h, replace, say, statusLine, uniqueId, utcTime, type Child } from '../dom.js';
import { showServedRevision } from '../revision.js';

interface PolicyRecord {
  id: number;
  path?: string;
  dataKey?: string;
  kind?: string;
  content?: string;
  payload?: string;
  mode?: string;
  tenantId?: string | null;
  version?: string | null;
}

interface Compared {
  allow: boolean;
  scopes?: string[];
  authorization_details?: unknown[];
  obligations?: Record<string, unknown>;
  error?: string;
  error_description?: string;
  engineError?: string;
}

/** One decision that would be (or, for a shadow, was) decided otherwise. */
export interface ChangedDecision {
  auditId: number;
  index?: number;
  time: string;
  point: string;
  clientId: string | null;
  subject: string | null;
  kind: string;
  before: Compared;
  after: Compared;
}

type Counts = Record<string, number>;

interface Impact {
  replayed: number;
  skipped: number;
  changed: ChangedDecision[];
  summary: { byPoint: Record<string, Counts>; byClient: Record<string, Counts> };
  revisions: { live: string; candidate: string };
  /** What applying it would signal to Shared Signals receivers (absent: this server sends none from policy). */
  signals?: { liveTokens: number; receivers: number };
  ms: number;
}

interface ShadowStatus {
  active: boolean;
  candidateRevision: string | null;
  evaluated: number;
  since: string | null;
  records: { collection: string; id: number; path?: string; dataKey?: string; enabled?: boolean }[];
}

interface ShadowDifferences {
  active: boolean;
  candidateRevision: string | null;
  evaluated: number;
  differences: ChangedDecision[];
}

const KIND_WORDS: Record<string, string> = {
  allow_to_deny: 'allowed → refused',
  deny_to_allow: 'refused → allowed',
  narrower: 'narrower',
  wider: 'wider',
  other: 'other',
};

/** Changed decisions shown in a table; the answer holds them all. */
const SHOWN_CHANGES = 200;

/**
 * "Know before you change": edit a policy rule or data entry, try it against the tenant's recent
 * recorded decisions (POST /policy-impact), see the decisions it would flip with a link to each
 * audit entry's explanation, then apply it, save it as a shadow, or discard it; and the shadow
 * policy's differences from live traffic, with promote and discard.
 */
export function policyChangesPage(main: HTMLElement): void {
  const status = statusLine();
  const results = h('section', { class: 'impact-results', 'aria-label': 'Impact of the change' });
  const shadowArea = h('section', { class: 'shadow', 'aria-labelledby': 'shadow-heading' });
  let records: { rules: PolicyRecord[]; data: PolicyRecord[] } = { rules: [], data: [] };

  const collection = select('policy-collection', 'What to change', [
    ['policy-rules', 'A policy rule'],
    ['policy-data', 'A policy data entry'],
  ]);
  const target = select('policy-target', 'Record', []);
  const path = text('policy-path', 'Path (a new rule) or data key (a new entry)');
  const kind = select('policy-kind', 'Kind', [
    ['rego', 'Rego'],
    ['cedar', 'Cedar'],
  ]);
  const source = h('textarea', {
    id: 'policy-source',
    name: 'source',
    rows: 18,
    class: 'code',
    spellcheck: 'false',
    'aria-describedby': 'policy-source-error',
  });
  const sourceError = h('p', { class: 'field-error', id: 'policy-source-error', hidden: true });
  const limit = h('input', { id: 'impact-limit', name: 'limit', type: 'number', min: 1, max: 100000, value: '1000' });
  const point = text('impact-point', 'Only decisions of point');
  const client = text('impact-client', 'Only decisions of client');

  async function loadRecords(): Promise<void> {
    try {
      const [rules, data] = await Promise.all([
        api<PolicyRecord[]>('GET', '/policy-rules?limit=1000'),
        api<PolicyRecord[]>('GET', '/policy-data?limit=1000'),
      ]);
      const live = (record: PolicyRecord) => record.mode !== 'shadow' && !record.tenantId && !record.version;
      records = { rules: rules.filter(live), data: data.filter(live) };
      fillTargets();
    } catch (error) {
      say(status, (error as Error).message, 'error');
    }
  }

  /** The records of the chosen collection to pick from; the one picked stays picked (after a save, as it is now). */
  function fillTargets(): void {
    const list = collection.input.value === 'policy-rules' ? records.rules : records.data;
    const picked = target.input.value;
    replace(
      target.input,
      h('option', { value: '' }, collection.input.value === 'policy-rules' ? 'A new rule' : 'A new entry'),
      list.map((record) => h('option', { value: String(record.id) }, record.path ?? record.dataKey ?? '')),
    );
    if (list.some((record) => String(record.id) === picked)) target.input.value = picked;
    showTarget();
  }

  function chosen(): PolicyRecord | undefined {
    const list = collection.input.value === 'policy-rules' ? records.rules : records.data;
    return list.find((record) => String(record.id) === target.input.value);
  }

  function showTarget(): void {
    const record = chosen();
    const rules = collection.input.value === 'policy-rules';
    path.wrapper.hidden = record !== undefined;
    kind.wrapper.hidden = !rules || record !== undefined;
    source.value = record ? ((rules ? record.content : record.payload) ?? '') : '';
    if (record?.kind) kind.input.value = record.kind;
    clearError();
    replace(results);
  }

  /** The change as the Admin API takes it: the record exactly as POST or PUT of its collection would. */
  function change(): { collection: string; op: string; id?: number; record: Record<string, unknown> } {
    const record = chosen();
    const rules = collection.input.value === 'policy-rules';
    const fields: Record<string, unknown> = rules
      ? { kind: record?.kind ?? kind.input.value, path: record?.path ?? path.input.value.trim(), content: source.value }
      : { dataKey: record?.dataKey ?? path.input.value.trim(), payload: source.value };
    return record
      ? { collection: collection.input.value, op: 'replace', id: record.id, record: fields }
      : { collection: collection.input.value, op: 'create', record: fields };
  }

  async function tryIt(): Promise<void> {
    clearError();
    say(status, 'Checking the change and replaying recent decisions…');
    replace(results);
    const filter: Record<string, string> = {};
    if (point.input.value.trim()) filter.point = point.input.value.trim();
    if (client.input.value.trim()) filter.clientId = client.input.value.trim();
    try {
      const impact = await api<Impact>('POST', '/policy-impact', {
        changes: [change()],
        limit: Number(limit.value) || 1000,
        ...(Object.keys(filter).length ? { filter } : {}),
      });
      say(
        status,
        `Replayed ${impact.replayed} recent decisions in ${(impact.ms / 1000).toFixed(1)} s: ${impact.changed.length} would change.`,
        'ok',
      );
      replace(results, impactView(impact), decisionButtons());
      results.querySelector('h3')?.focus();
    } catch (error) {
      refused(error);
    }
  }

  function decisionButtons(): HTMLElement {
    const shadowButton = h(
      'button',
      { type: 'button', class: 'secondary', onclick: () => void save('shadow') },
      'Save as shadow',
    );
    return h(
      'div',
      { class: 'buttons' },
      h('button', { type: 'button', onclick: () => void save('live') }, 'Apply'),
      shadowButton,
      h('button', { type: 'button', class: 'secondary', onclick: discard }, 'Discard'),
    );
  }

  /** The change written for real (every check of a write again), live or as a shadow beside the live record. */
  async function save(mode: 'live' | 'shadow'): Promise<void> {
    const { id, record } = change();
    const path = `/${collection.input.value}`;
    try {
      if (mode === 'shadow') await api('POST', path, { ...record, mode: 'shadow' });
      else if (id !== undefined) await api('PUT', `${path}/${id}`, record);
      else await api('POST', path, record);
      replace(results);
      if (mode === 'live') await showServedRevision(status);
      else say(status, 'Saved as a shadow: live decisions are now also evaluated against it (below).', 'ok');
      await loadRecords();
      await loadShadow();
    } catch (error) {
      refused(error);
    }
  }

  function discard(): void {
    showTarget();
    say(status, 'Discarded: nothing was changed.');
  }

  function refused(error: unknown): void {
    if (error instanceof ApiError && ['content', 'payload', 'path', 'dataKey', 'kind'].includes(error.field ?? '')) {
      sourceError.textContent = error.message;
      sourceError.hidden = false;
      source.setAttribute('aria-invalid', 'true');
      say(status, 'Not tried: see the error under the source.', 'error');
      source.focus();
      return;
    }
    say(status, (error as Error).message, 'error');
  }

  function clearError(): void {
    sourceError.hidden = true;
    source.removeAttribute('aria-invalid');
  }

  async function loadShadow(): Promise<void> {
    try {
      const [shadow, differences] = await Promise.all([
        api<ShadowStatus>('GET', '/policy-shadow'),
        api<ShadowDifferences>('GET', '/policy-shadow/differences?limit=200'),
      ]);
      replace(shadowArea, ...shadowView(shadow, differences));
    } catch (error) {
      replace(
        shadowArea,
        h('h3', { id: 'shadow-heading' }, 'Shadow policy'),
        h('p', { class: 'status error' }, (error as Error).message),
      );
    }
  }

  function shadowView(shadow: ShadowStatus, differences: ShadowDifferences): Child[] {
    const heading = h('h3', { id: 'shadow-heading', tabindex: -1 }, 'Shadow policy');
    if (!shadow.active)
      return [
        heading,
        h('p', {}, 'No shadow records: every decision is the live policy’s, and nothing else is evaluated.'),
      ];
    const act = async (what: 'promote' | 'discard') => {
      try {
        await api('POST', `/policy-shadow/${what}`, { candidateRevision: shadow.candidateRevision });
        if (what === 'promote') await showServedRevision(status);
        else say(status, 'Shadow records discarded.', 'ok');
        await loadRecords();
        await loadShadow();
      } catch (error) {
        say(status, (error as Error).message, 'error');
      }
    };
    return [
      heading,
      h(
        'p',
        {},
        `Candidate revision ${shadow.candidateRevision}: `,
        shadow.records.flatMap((record, index) => [
          index ? ', ' : '',
          h('code', {}, record.path ?? record.dataKey ?? String(record.id)),
        ]),
        `. Since ${shadow.since ? new Date(shadow.since).toLocaleString() : '—'}, this node evaluated ${plural(differences.evaluated, 'live decision')} of this tenant against it: ${differences.differences.length} decided otherwise.`,
      ),
      differences.differences.length
        ? changesTable('Live decisions the shadow policy decides otherwise', differences.differences)
        : h('p', {}, 'No difference so far.'),
      h(
        'div',
        { class: 'buttons' },
        h('button', { type: 'button', onclick: () => void act('promote') }, 'Promote the shadow'),
        h('button', { type: 'button', class: 'danger', onclick: () => void act('discard') }, 'Discard the shadow'),
        h('button', { type: 'button', class: 'secondary', onclick: () => void loadShadow() }, 'Refresh'),
      ),
    ];
  }

  collection.input.addEventListener('change', () => {
    target.input.value = '';
    fillTargets();
  });
  target.input.addEventListener('change', showTarget);
  const form = h(
    'form',
    { class: 'record-form impact-form', 'aria-label': 'Proposed policy change' },
    collection.wrapper,
    target.wrapper,
    path.wrapper,
    kind.wrapper,
    h('div', { class: 'field field-source' }, h('label', { for: source.id }, 'Source'), source, sourceError),
    h(
      'fieldset',
      { class: 'filters' },
      h('legend', {}, 'Recent traffic to replay'),
      h('div', { class: 'field' }, h('label', { for: limit.id }, 'Most recent decisions'), limit),
      point.wrapper,
      client.wrapper,
    ),
    h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Try against recent traffic')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void tryIt();
  });
  replace(
    main,
    h('h2', { tabindex: -1 }, 'Policy changes'),
    h(
      'p',
      { class: 'hint' },
      'Try a change of a rule or data entry against this tenant’s recorded decisions before anything is in force; apply it, keep it as a shadow that every live decision is also evaluated against, or discard it.',
    ),
    form,
    status,
    results,
    shadowArea,
  );
  void loadRecords();
  void loadShadow();
}

/** The summary and the decisions a change would flip. */
function impactView(impact: Impact): HTMLElement {
  const counts = Object.values(impact.summary.byPoint).reduce<Counts>((total, each) => {
    for (const [key, value] of Object.entries(each)) total[key] = (total[key] ?? 0) + value;
    return total;
  }, {});
  const words = Object.entries(KIND_WORDS)
    .filter(([key]) => counts[key])
    .map(([key, word]) => `${counts[key]} ${word}`)
    .join(', ');
  return h(
    'div',
    {},
    h('h3', { tabindex: -1 }, 'Impact on recent traffic'),
    h(
      'p',
      {},
      `${impact.replayed} decisions replayed${impact.skipped ? ` (${impact.skipped} recorded inputs no longer fit their point and were skipped)` : ''}; ${impact.changed.length} would change${words ? `: ${words}` : ''}.`,
    ),
    impact.signals ? signalsLine(impact.signals) : null,
    impact.changed.length ? changesTable('Decisions this change would decide otherwise', impact.changed) : null,
    summaryTable('By client', impact.summary.byClient),
  );
}

/**
 * What applying the change tells Shared Signals receivers: the live tokens it would refuse or
 * narrow (decided again at the introspection point, as the recheck after it is applied does) and
 * the streams told; said plainly when no receiver would hear of it.
 */
function signalsLine(signals: { liveTokens: number; receivers: number }): HTMLElement {
  const tokens = plural(signals.liveTokens, 'live token');
  if (signals.receivers === 0)
    return h(
      'p',
      { class: 'impact-signals' },
      signals.liveTokens === 0
        ? 'Shared Signals: applying it tells no receiver.'
        : `Shared Signals: no receiver listens for these changes: ${tokens} would be refused or narrowed, and nobody is told.`,
    );
  return h(
    'p',
    { class: 'impact-signals' },
    h(
      'strong',
      {},
      `Applying it tells ${plural(signals.receivers, 'receiver stream')} about ${tokens} it refuses or narrows`,
    ),
    ' (CAEP session-revoked or token-claims-change, once it is in force).',
  );
}

/** Changed decisions, each with a link to its audit entry's explanation; one card per row on a phone. */
export function changesTable(caption: string, changed: ChangedDecision[]): HTMLElement {
  const shown = changed.slice(0, SHOWN_CHANGES);
  return asCards(
    h(
      'table',
      { class: 'changes' },
      h(
        'caption',
        {},
        changed.length > shown.length ? `${caption} (the newest ${shown.length} of ${changed.length})` : caption,
      ),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Entry', 'Time (UTC)', 'Point', 'Client', 'Subject', 'Change', 'Before', 'After'].map((name) =>
            h('th', { scope: 'col' }, name),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        shown.map((change) =>
          h(
            'tr',
            { 'data-entry': change.auditId, class: `kind-${change.kind}` },
            h(
              'th',
              { scope: 'row' },
              h(
                'a',
                { href: `#/why/${change.auditId}`, 'aria-label': `Why? Explanation of audit entry ${change.auditId}` },
                `#${change.auditId}`,
              ),
            ),
            h('td', {}, utcTime(change.time)),
            h('td', {}, change.point),
            h('td', {}, change.clientId ?? ''),
            h('td', {}, change.subject ?? ''),
            h('td', { class: `change ${change.kind}` }, KIND_WORDS[change.kind] ?? change.kind),
            h('td', {}, decisionWords(change.before)),
            h('td', {}, decisionWords(change.after)),
          ),
        ),
      ),
    ) as HTMLTableElement,
  );
}

function summaryTable(caption: string, table: Record<string, Counts>): HTMLElement | null {
  const rows = Object.entries(table).sort(([, a], [, b]) => (b.changed ?? 0) - (a.changed ?? 0));
  if (rows.length === 0) return null;
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
          ['', 'Replayed', 'Changed', ...Object.values(KIND_WORDS)].map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map(([key, counts]) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row' }, key),
            h('td', {}, String(counts.replayed ?? 0)),
            h('td', {}, String(counts.changed ?? 0)),
            Object.keys(KIND_WORDS).map((kind) => h('td', {}, String(counts[kind] ?? 0))),
          ),
        ),
      ),
    ) as HTMLTableElement,
  );
}

function decisionWords(decision: Compared): string {
  if (!decision.allow)
    return `refused${decision.error ? `: ${decision.error}` : ''}${decision.engineError ? ` (${decision.engineError})` : ''}`;
  const parts = [`scopes: ${decision.scopes?.join(' ') || 'none'}`];
  if (decision.authorization_details?.length)
    parts.push(`${decision.authorization_details.length} authorization details`);
  if (decision.obligations && Object.keys(decision.obligations).length)
    parts.push(`obligations: ${Object.keys(decision.obligations).join(', ')}`);
  return `allowed (${parts.join('; ')})`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function select(id: string, label: string, options: [string, string][]) {
  const input = h(
    'select',
    { id, name: id },
    options.map(([value, text]) => h('option', { value }, text)),
  );
  return { input, wrapper: h('div', { class: 'field' }, h('label', { for: id }, label), input) };
}

function text(id: string, label: string) {
  const input = h('input', { id: id || uniqueId('field'), name: id, type: 'text' });
  return { input, wrapper: h('div', { class: 'field' }, h('label', { for: input.id }, label), input) };
}
