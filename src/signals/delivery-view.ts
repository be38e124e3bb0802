import { shownUrl } from '../http/outbound.js';
import type { Outbox, OutboxEntry } from '../outbox/index.js';
import type { Store } from '../store/index.js';
import { PUSH, ssfStreams, type StreamRecord } from './streams.js';
import { ssfPolled, SSF_TOPIC, Transmitter } from './transmitter.js';

/** The most streams of a tenant the view lists (a receiver has at most 10). */
const STREAMS_SHOWN = 1_000;
/** The most SETs of a poll stream counted as waiting for their acknowledgement (its queue's bound). */
const POLL_QUEUE_COUNTED = 10_000;

/** What is waiting in the outbox for one ordering key: how many, the oldest's age, and the head's last failure. */
export interface PendingDelivery {
  pending: number;
  /** Pending entries whose delivery failed at least once (in practice the head: it holds the rest back). */
  retrying: number;
  /** Of the oldest pending entry, in seconds (0 when none). */
  oldestPendingSeconds: number;
  /** The head's failed attempts, its next attempt and why the last one failed (never a secret). */
  attempts: number;
  nextAttemptAt: string | null;
  lastError: string | null;
}

/** One Shared Signals stream of a tenant as its operator sees it (never its Authorization header). */
export interface StreamDelivery {
  streamId: string;
  receiver: string;
  deliveryMethod: StreamRecord['deliveryMethod'];
  /** A push stream's endpoint, its origin and path only: a query string may carry a credential. Null for poll. */
  endpoint: string | null;
  status: StreamRecord['status'];
  reason: string | null;
  eventsRequested: string[];
  defaultSubjects: StreamRecord['defaultSubjects'];
  subjects: number;
  createdAt: string;
  delivery: PendingDelivery & {
    /** A poll stream's SETs handed over to its queue and not yet acknowledged by the receiver (null for push). */
    awaitingAcknowledgement: number | null;
  };
}

/** GET /admin/api/signals/streams: a tenant's streams and its outbox topics. */
export interface TenantSignalsView {
  streams: StreamDelivery[];
  /** The tenant's outbox entries per topic (`ssf`, `backchannel-logout`), the topics with none left out. */
  topics: ({ topic: string } & PendingDelivery)[];
  /** False when the outbox held more than the entries read (the oldest READ_LIMIT, every tenant's): the counts are of those. */
  complete: boolean;
}

/**
 * A tenant's delivery state, read-only, for the Admin API and the console: its SSF streams, each
 * with what waits for it in the outbox, and its entries per topic. The outbox is shared by every
 * tenant; an ordering key `<topic>:<tenant>:…` (Transmitter.streamKey, the back-channel logout's
 * key) belongs to that tenant, and only those are counted here.
 */
export async function tenantSignalsView(store: Store, outbox: Outbox, tenant: string): Promise<TenantSignalsView> {
  const [streams, { entries, complete }] = await Promise.all([
    ssfStreams(store, tenant).find({}, { sort: { field: 'createdAt', direction: 'asc' }, limit: STREAMS_SHOWN }),
    outbox.pending(),
  ]);
  const mine = entries.filter((entry) => entry.stream.startsWith(`${entry.topic}:${tenant}:`));
  const now = Date.now();
  const byKey = groupBy(mine, (entry) => entry.stream);
  const byTopic = groupBy(mine, (entry) => entry.topic);
  const shown: StreamDelivery[] = [];
  for (const stream of streams) {
    const awaiting =
      stream.deliveryMethod === PUSH
        ? null
        : await ssfPolled(store, tenant).count({ streamId: stream.id }, undefined, POLL_QUEUE_COUNTED);
    shown.push({
      streamId: stream.id,
      receiver: stream.ownerClientId,
      deliveryMethod: stream.deliveryMethod,
      endpoint: stream.deliveryMethod === PUSH ? shownUrl(stream.endpointUrl) : null,
      status: stream.status,
      reason: stream.reason,
      eventsRequested: stream.eventsRequested,
      defaultSubjects: stream.defaultSubjects,
      subjects: stream.subjects.length,
      createdAt: stream.createdAt,
      delivery: {
        ...pendingDelivery(byKey.get(Transmitter.streamKey(tenant, stream.id)) ?? [], now),
        awaitingAcknowledgement: awaiting,
      },
    });
  }
  const topics = [...byTopic].map(([topic, pending]) => ({ topic, ...pendingDelivery(pending, now) }));
  // SETs first, whatever else the tenant has waiting.
  topics.sort(
    (a, b) => Number(b.topic === SSF_TOPIC) - Number(a.topic === SSF_TOPIC) || a.topic.localeCompare(b.topic),
  );
  return { streams: shown, topics, complete };
}

/** `entries` in the order of their appends (oldest first). */
function pendingDelivery(entries: readonly OutboxEntry[], now: number): PendingDelivery {
  const failed = entries.filter((entry) => entry.attempts > 0);
  // The entry tried last is the one whose failure an operator acts on: the oldest failing (its stream's head).
  const head = failed[0];
  return {
    pending: entries.length,
    retrying: failed.length,
    oldestPendingSeconds: entries[0] ? Math.max(0, (now - entries[0].createdAt) / 1000) : 0,
    attempts: head?.attempts ?? 0,
    nextAttemptAt: head ? new Date(head.notBefore).toISOString() : null,
    lastError: head?.lastError ?? null,
  };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(key(item));
    if (group) group.push(item);
    else groups.set(key(item), [item]);
  }
  return groups;
}
