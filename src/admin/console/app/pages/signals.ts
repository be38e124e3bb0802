import { ApiError, api } from '../api.js';
import { asCards, detached, h, replace, say, statusLine, utcTime, type Child } from '../dom.js';

/** What waits in the outbox for a stream or a topic (GET /signals/streams). */
interface PendingDelivery {
  pending: number;
  retrying: number;
  oldestPendingSeconds: number;
  attempts: number;
  nextAttemptAt: string | null;
  lastError: string | null;
}

interface StreamDelivery {
  streamId: string;
  receiver: string;
  deliveryMethod: string;
  endpoint: string | null;
  status: string;
  reason: string | null;
  eventsRequested: string[];
  defaultSubjects: string;
  subjects: number;
  delivery: PendingDelivery & { awaitingAcknowledgement: number | null };
}

interface TenantSignals {
  streams: StreamDelivery[];
  topics: ({ topic: string } & PendingDelivery)[];
  complete: boolean;
}

/** GET /outbox: the node's view of every tenant's outbox. */
interface Outbox {
  pending: number;
  lagSeconds: number;
  failing: number;
  delivered: number;
  failures: number;
  givenUp: number;
  topics: Record<string, { delivered: number; failures: number; givenUp: Record<string, number> }>;
  leader: boolean;
}

const PUSH = 'urn:ietf:rfc:8935';

const TOPIC_WORDS: Record<string, string> = {
  ssf: 'Security Event Tokens',
  'backchannel-logout': 'Back-channel logout tokens',
};

/**
 * Shared Signals as an operator watches them: the tenant's streams (who receives, how, what),
 * what waits for each in the outbox and why (a receiver that is down: its SETs pending, the last
 * failure, the next attempt), the tenant's outbox per topic, and this node's delivery figures.
 */
export function signalsPage(main: HTMLElement): void {
  const status = statusLine();
  const streams = section('signals-streams', 'Streams');
  const topics = section('signals-topics', 'Waiting in this tenant’s outbox');
  const node = section('signals-node', 'This node, every tenant');

  async function load(): Promise<void> {
    say(status, 'Reading…');
    const [tenant, outbox] = await Promise.allSettled([
      api<TenantSignals>('GET', '/signals/streams'),
      api<Outbox>('GET', '/outbox'),
    ]);
    if (tenant.status === 'fulfilled') {
      fill(streams, streamsView(tenant.value));
      fill(topics, topicsView(tenant.value));
    } else {
      fill(streams, failure(tenant.reason));
      fill(topics);
    }
    fill(node, outbox.status === 'fulfilled' ? nodeView(outbox.value) : nodeRefused(outbox.reason));
    if (tenant.status === 'fulfilled') say(status, `Read at ${utcTime(new Date().toISOString())}.`, 'ok');
    else say(status, (tenant.reason as Error).message, 'error');
  }

  replace(
    main,
    h('h2', { tabindex: -1 }, 'Shared Signals'),
    h(
      'p',
      { class: 'hint' },
      'The Security Event Tokens this tenant’s receivers are sent: each stream, what waits for it in the outbox and why. An event waits while its receiver does not take it, and is tried again with back-off.',
    ),
    h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: detached(load) }, 'Refresh')),
    status,
    streams,
    topics,
    node,
  );
  void load();
}

function section(id: string, title: string): HTMLElement {
  const element = h('section', { 'aria-labelledby': id }, h('h3', { id }, title));
  element.dataset.title = title;
  return element;
}

/** Replaces a section's content under its heading. */
function fill(element: HTMLElement, ...children: (Child | Child[])[]): void {
  const id = element.getAttribute('aria-labelledby') ?? '';
  replace(element, h('h3', { id }, element.dataset.title ?? ''), ...children);
}

function streamsView(view: TenantSignals): HTMLElement {
  if (view.streams.length === 0)
    return h(
      'p',
      { class: 'no-streams' },
      'No receiver has a stream in this tenant: its changes are signalled to nobody.',
    );
  return asCards(
    h(
      'table',
      { class: 'streams' },
      h('caption', {}, `Streams of this tenant (${view.streams.length})`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          [
            'Stream',
            'Receiver',
            'Delivery',
            'Status',
            'Events',
            'Pending',
            'Retrying',
            'Oldest pending',
            'Last failure',
          ].map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h(
        'tbody',
        {},
        view.streams.map((stream) =>
          h(
            'tr',
            { 'data-stream': stream.streamId },
            h('th', { scope: 'row' }, h('code', {}, stream.streamId)),
            h('td', {}, stream.receiver),
            h('td', {}, deliveryWords(stream)),
            h('td', {}, stream.reason ? `${stream.status}: ${stream.reason}` : stream.status),
            h('td', {}, eventWords(stream)),
            h('td', { class: 'pending' }, String(stream.delivery.pending)),
            h('td', { class: 'retrying' }, String(stream.delivery.retrying)),
            h('td', {}, age(stream.delivery)),
            h('td', { class: 'last-failure' }, failureWords(stream.delivery)),
          ),
        ),
      ),
    ) as HTMLTableElement,
  );
}

function topicsView(view: TenantSignals): Child[] {
  const partial = view.complete
    ? null
    : h(
        'p',
        { class: 'hint' },
        'The outbox holds more than the 10,000 oldest entries read: these counts are of those.',
      );
  if (view.topics.length === 0)
    return [h('p', {}, 'Nothing waits: every event of this tenant has been delivered.'), partial];
  return [
    asCards(
      h(
        'table',
        { class: 'topics' },
        h('caption', {}, 'Outbox entries of this tenant by topic'),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['Topic', 'Pending', 'Retrying', 'Oldest pending', 'Last failure'].map((name) =>
              h('th', { scope: 'col' }, name),
            ),
          ),
        ),
        h(
          'tbody',
          {},
          view.topics.map((topic) =>
            h(
              'tr',
              { 'data-topic': topic.topic },
              h('th', { scope: 'row' }, TOPIC_WORDS[topic.topic] ?? topic.topic),
              h('td', { class: 'pending' }, String(topic.pending)),
              h('td', { class: 'retrying' }, String(topic.retrying)),
              h('td', {}, age(topic)),
              h('td', { class: 'last-failure' }, failureWords(topic)),
            ),
          ),
        ),
      ) as HTMLTableElement,
    ),
    partial,
  ];
}

function nodeView(outbox: Outbox): HTMLElement {
  const rows: [string, string, string][] = [
    ['Pending, every tenant', String(outbox.pending), 'node-pending'],
    ['Oldest pending', seconds(outbox.lagSeconds), 'node-lag'],
    ['Pending that failed at least once', String(outbox.failing), 'node-failing'],
    ['Delivered by this node since it started', String(outbox.delivered), 'node-delivered'],
    ['Failed attempts of this node', String(outbox.failures), 'node-failures'],
    ['Given up by this node (too old, or their tenant is gone)', String(outbox.givenUp), 'node-given-up'],
    ['This node delivers now (holds the lease)', outbox.leader ? 'yes' : 'no', 'node-leader'],
  ];
  return h(
    'div',
    {},
    h(
      'dl',
      { class: 'revisions outbox-figures' },
      rows.flatMap(([term, value, id]) => [h('dt', {}, term), h('dd', { id }, value)]),
    ),
    nodeTopicsView(outbox),
  );
}

/** This node's counts per topic: which kind of delivery fails or is given up, and why. */
function nodeTopicsView(outbox: Outbox): HTMLElement | null {
  const topics = Object.entries(outbox.topics);
  if (topics.length === 0) return null;
  const columns = ['Topic', 'Delivered', 'Failed attempts', 'Given up: too old', 'Given up: tenant gone'];
  return asCards(
    h(
      'table',
      { class: 'node-topics' },
      h('caption', {}, 'This node’s deliveries by topic, since it started'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          columns.map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h(
        'tbody',
        {},
        topics.map(([topic, counts]) =>
          h(
            'tr',
            { 'data-topic': topic },
            h('th', { scope: 'row' }, TOPIC_WORDS[topic] ?? topic),
            h('td', { class: 'delivered' }, String(counts.delivered)),
            h('td', { class: 'failures' }, String(counts.failures)),
            h('td', { class: 'given-up-max-age' }, String(counts.givenUp['max-age'] ?? 0)),
            h('td', { class: 'given-up-tenant-gone' }, String(counts.givenUp['tenant-gone'] ?? 0)),
          ),
        ),
      ),
    ) as HTMLTableElement,
  );
}

function nodeRefused(reason: unknown): HTMLElement {
  if (reason instanceof ApiError && reason.status === 403)
    return h('p', {}, 'The outbox of every tenant needs an Admin API key that is not confined to tenants.');
  return failure(reason);
}

function failure(reason: unknown): HTMLElement {
  return h('p', { class: 'status error' }, (reason as Error).message);
}

function deliveryWords(stream: StreamDelivery): string {
  if (stream.deliveryMethod === PUSH) return `Push to ${stream.endpoint ?? ''}`;
  const waiting = stream.delivery.awaitingAcknowledgement ?? 0;
  return `Poll: ${waiting} SET${waiting === 1 ? '' : 's'} not yet acknowledged`;
}

/** The event types by their last segment (session-revoked, …), and whose: every subject or those added. */
function eventWords(stream: StreamDelivery): string {
  const types = stream.eventsRequested.map((type) => type.split('/').pop() ?? type).join(', ') || 'none';
  const whose =
    stream.defaultSubjects === 'ALL'
      ? 'every subject'
      : `${stream.subjects} subject${stream.subjects === 1 ? '' : 's'} added`;
  return `${types} (${whose})`;
}

function age(delivery: PendingDelivery): string {
  return delivery.pending === 0 ? '—' : seconds(delivery.oldestPendingSeconds);
}

function seconds(value: number): string {
  if (value < 120) return `${value.toFixed(value < 10 ? 1 : 0)} s`;
  if (value < 7200) return `${Math.round(value / 60)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

function failureWords(delivery: PendingDelivery): string {
  if (!delivery.lastError) return '—';
  const next = delivery.nextAttemptAt ? `; next attempt ${utcTime(delivery.nextAttemptAt)}` : '';
  return `${delivery.lastError} (${delivery.attempts} attempt${delivery.attempts === 1 ? '' : 's'}${next})`;
}
