import { api, serverHealth, type Health } from '../api.js';
import { stackedBars } from '../chart.js';
import { h, replace, type Child } from '../dom.js';

interface Counts {
  allow: number;
  deny: number;
  error: number;
}

interface Activity {
  minutes: { at: string; byPoint: Record<string, Counts> }[];
  deniedClients: { clientId: string; denials: number; decisions: number }[];
  deniedPoints: { point: string; denials: number; decisions: number }[];
  countingSince: string;
}

interface ShadowStatus {
  active: boolean;
  candidateRevision: string | null;
  evaluated: number;
  summary: { byPoint: Record<string, Record<string, number>> };
}

const OUTCOMES: { key: keyof Counts; name: string; className: string }[] = [
  { key: 'allow', name: 'allowed', className: 'bar-allow' },
  { key: 'deny', name: 'refused', className: 'bar-deny' },
  { key: 'error', name: 'failed closed', className: 'bar-error' },
];

/**
 * The page the console opens on: is the server healthy and which policy revision is in force (in
 * the store, in OPA, compiled in process), the last hour's decisions per minute by point and
 * outcome, the clients and points with the most refusals, and the shadow policy's differences.
 */
export function overviewPage(main: HTMLElement): void {
  const health = h(
    'section',
    { class: 'overview-health', 'aria-labelledby': 'overview-health' },
    h('h3', { id: 'overview-health' }, 'Health'),
    h('p', {}, 'Asking…'),
  );
  const activity = h(
    'section',
    { class: 'overview-activity', 'aria-labelledby': 'overview-activity' },
    h('h3', { id: 'overview-activity' }, 'Decisions in the last hour'),
    h('p', {}, 'Counting…'),
  );
  const shadow = h(
    'section',
    { 'aria-labelledby': 'overview-shadow' },
    h('h3', { id: 'overview-shadow' }, 'Shadow policy'),
  );
  replace(main, h('h2', { tabindex: -1 }, 'Overview'), health, activity, shadow);
  void serverHealth().then(
    (answer) => replace(health, h('h3', { id: 'overview-health' }, 'Health'), ...healthView(answer)),
    (error: unknown) =>
      replace(
        health,
        h('h3', { id: 'overview-health' }, 'Health'),
        h('p', { class: 'status error' }, (error as Error).message),
      ),
  );
  void api<Activity>('GET', '/activity').then(
    (answer) =>
      replace(activity, h('h3', { id: 'overview-activity' }, 'Decisions in the last hour'), ...activityView(answer)),
    (error: unknown) =>
      replace(
        activity,
        h('h3', { id: 'overview-activity' }, 'Decisions in the last hour'),
        h('p', { class: 'status error' }, (error as Error).message),
      ),
  );
  void api<ShadowStatus>('GET', '/policy-shadow').then(
    (answer) => replace(shadow, h('h3', { id: 'overview-shadow' }, 'Shadow policy'), shadowView(answer)),
    () => replace(shadow, h('h3', { id: 'overview-shadow' }, 'Shadow policy'), h('p', {}, 'Not available.')),
  );
}

function healthView(health: Health): Child[] {
  const revision = health.policyRevision as (Health['policyRevision'] & { inProcess?: string | null }) | undefined;
  const short = (value: string | null | undefined) => (value ? value.slice(0, 12) : 'none');
  const inForce = revision && revision.opa === revision.store;
  return [
    h(
      'p',
      { class: `health-status ${health.status === 'ok' ? 'ok' : 'problem'}` },
      `Server ${health.status}: policy ${health.policy ?? 'unknown'}.`,
    ),
    revision
      ? h(
          'dl',
          { class: 'revisions' },
          h('dt', {}, 'Revision in the store'),
          h('dd', {}, h('code', {}, short(revision.store))),
          h('dt', {}, 'Revision OPA serves'),
          h('dd', {}, h('code', {}, short(revision.opa)), inForce ? ' (in force)' : ' (behind the store)'),
          h('dt', {}, 'Revision decided in process'),
          h(
            'dd',
            {},
            h('code', {}, short(revision.inProcess)),
            revision.inProcess === revision.store ? ' (Rego in process)' : ' (Rego decisions go to OPA)',
          ),
        )
      : null,
  ];
}

function activityView(activity: Activity): Child[] {
  const points = [...new Set(activity.minutes.flatMap((minute) => Object.keys(minute.byPoint)))].sort();
  const labels = activity.minutes.map((minute) =>
    new Date(minute.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }),
  );
  if (points.length === 0)
    return [
      h(
        'p',
        {},
        `No decision in the last hour on this node (counting since ${new Date(activity.countingSince).toLocaleString()}).`,
      ),
    ];
  const totals = (point: string) =>
    activity.minutes.reduce(
      (sum, minute) => {
        const counts = minute.byPoint[point];
        if (counts) for (const outcome of OUTCOMES) sum[outcome.key] += counts[outcome.key];
        return sum;
      },
      { allow: 0, deny: 0, error: 0 },
    );
  return [
    h(
      'p',
      { class: 'legend' },
      OUTCOMES.map((outcome) => h('span', {}, h('span', { class: `box ${outcome.className}` }), outcome.name)),
    ),
    ...points.map((point) =>
      h(
        'figure',
        { class: 'point-chart' },
        h('figcaption', {}, `${point}: decisions per minute`),
        stackedBars(
          `${point}, decisions per minute by outcome`,
          labels,
          OUTCOMES.map((outcome) => ({
            name: outcome.name,
            className: outcome.className,
            values: activity.minutes.map((minute) => minute.byPoint[point]?.[outcome.key] ?? 0),
          })),
        ),
      ),
    ),
    h(
      'table',
      {},
      h('caption', {}, 'Decisions in the last hour by point'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Point', 'Allowed', 'Refused', 'Failed closed'].map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h(
        'tbody',
        {},
        points.map((point) => {
          const counts = totals(point);
          return h(
            'tr',
            {},
            h('th', { scope: 'row' }, point),
            h('td', {}, String(counts.allow)),
            h('td', {}, String(counts.deny)),
            h('td', {}, String(counts.error)),
          );
        }),
      ),
    ),
    ranking(
      'Clients with the most refusals',
      'Client',
      activity.deniedClients.map((each) => [each.clientId, each.denials, each.decisions]),
    ),
    ranking(
      'Points with the most refusals',
      'Point',
      activity.deniedPoints.map((each) => [each.point, each.denials, each.decisions]),
    ),
  ];
}

function ranking(caption: string, what: string, rows: [string, number, number][]): HTMLElement {
  if (rows.length === 0) return h('p', {}, `${caption}: none refused.`);
  return h(
    'table',
    { class: 'ranking' },
    h('caption', {}, caption),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        [what, 'Refused', 'Of'].map((name) => h('th', { scope: 'col' }, name)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map(([name, denials, decisions]) =>
        h('tr', {}, h('th', { scope: 'row' }, name), h('td', {}, String(denials)), h('td', {}, String(decisions))),
      ),
    ),
  );
}

function shadowView(shadow: ShadowStatus): HTMLElement {
  if (!shadow.active) return h('p', {}, 'No shadow policy.');
  const changed = Object.values(shadow.summary.byPoint).reduce((sum, counts) => sum + (counts.changed ?? 0), 0);
  return h(
    'p',
    {},
    `Candidate revision ${shadow.candidateRevision?.slice(0, 12)}: ${changed} of ${shadow.evaluated} live decisions of this tenant decided otherwise. `,
    h('a', { href: '#/policy-changes' }, 'See the differences'),
  );
}
