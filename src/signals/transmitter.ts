import { randomUUID } from 'node:crypto';
import type { Outbound } from '../http/outbound.js';
import type { Logger } from '../log/index.js';
import type { Outbox, OutboxEntry } from '../outbox/index.js';
import type { Sealer, Store, StoredDoc } from '../store/index.js';
import { signedSet, type PendingSet } from './sets.js';
import {
  covers,
  ownedByLiveClient,
  PUSH,
  sameSubject,
  ssfStreams,
  streamsOfLiveOwners,
  type StreamRecord,
  type SubjectId,
} from './streams.js';
import { SSF_POLL_COLLECTION } from './collections.js';

/** The outbox topic of Security Event Tokens; each stream is one ordering key. */
export const SSF_TOPIC = 'ssf';

export interface PolledSet extends StoredDoc {
  /** The SET's jti: what the receiver acknowledges. */
  id: string;
  streamId: string;
  /** The outbox entry's sequence: poll answers keep the order of the changes. */
  seq: number;
  set: string;
}

export const ssfPolled = (store: Store, tenant: string) => store.collection<PolledSet>(SSF_POLL_COLLECTION, tenant);

/** The most SETs a poll stream holds unacknowledged; beyond it the rest wait in the outbox (the receiver is behind). */
const POLL_QUEUE_MAX = 10_000;

/**
 * Who or what an event is about. A user is identified to each stream as `iss_sub` under the
 * stream's issuer and, when known, by `email`; a client by `opaque` (its client_id).
 */
export type EventParty = { kind: 'user'; sub: string; email?: string | null } | { kind: 'client'; clientId: string };

export interface SignalEvent {
  type: string;
  party: EventParty;
  /** The event's own members (CAEP `event_timestamp`, `initiating_entity`, …). */
  data: Record<string, unknown>;
}

/**
 * A SET not delivered within a day is given up (the outbox's `max-age`): a receiver paused or
 * unreachable that long has lost track anyway, and its SETs must not pile up without end.
 */
const SET_MAX_AGE_MS = 24 * 3600_000;

/** Verification events are refused while this many of a stream's SETs wait undelivered. */
const VERIFY_PENDING_MAX = 10;

export interface TransmitterDeps {
  store: Store;
  sealer: Sealer;
  outbox: Outbox;
  outbound: Outbound;
  log: Logger;
}

/**
 * The transmitter's two halves: `emit` turns a change into one outbox entry per stream that
 * covers its subject (resolved when the change is made, so that a stream created afterwards
 * does not get it); `deliver`, the outbox handler, signs each SET and pushes it (RFC 8935) or
 * queues it for its poller (RFC 8936).
 */
export class Transmitter {
  constructor(private readonly deps: TransmitterDeps) {
    deps.outbox.handle(SSF_TOPIC, (entry) => this.deliver(entry), {
      tenantOf: (payload) => (payload as PendingSet).tenant,
      maxAgeMs: SET_MAX_AGE_MS,
    });
  }

  /**
   * Appends each event (all of one tenant) for every stream of the tenant that covers it, in
   * their order, in one write; resolves once stored. Returns how many SETs that makes.
   */
  async emit(tenant: string, events: readonly SignalEvent[]): Promise<number> {
    if (events.length === 0) return 0;
    const all = await ssfStreams(this.deps.store, tenant).find({}, { limit: 10_000 });
    const streams = await streamsOfLiveOwners(this.deps.store, tenant, all);
    const entries = events.flatMap((event) =>
      streams.flatMap((stream) => {
        const identifiers = identifiersOf(event.party, stream.iss);
        if (!covers(stream, event.type, identifiers)) return [];
        return [this.entryFor(stream, tenant, identifiers, { [event.type]: event.data })];
      }),
    );
    await this.deps.outbox.append(entries);
    return entries.length;
  }

  /**
   * SSF 1.0 §8.1.4: a verification event on one stream, about the stream itself; false, and none
   * appended, while VERIFY_PENDING_MAX of the stream's SETs wait (a paused or unreachable receiver
   * asking again and again would otherwise fill the outbox every stream shares).
   */
  async verify(tenant: string, stream: StreamRecord, state: string | undefined): Promise<boolean> {
    const key = Transmitter.streamKey(tenant, stream.id);
    if ((await this.deps.outbox.pendingOf(key, VERIFY_PENDING_MAX)).length >= VERIFY_PENDING_MAX) return false;
    await this.deps.outbox.append([
      this.entryFor(stream, tenant, [{ format: 'opaque', id: stream.id }], {
        'https://schemas.openid.net/secevent/ssf/event-type/verification': state === undefined ? {} : { state },
      }),
    ]);
    return true;
  }

  /** The outbox key of a stream's SETs. */
  static streamKey(tenant: string, streamId: string): string {
    return `${SSF_TOPIC}:${tenant}:${streamId}`;
  }

  private entryFor(
    stream: StreamRecord,
    tenant: string,
    identifiers: SubjectIds,
    events: PendingSet['events'],
  ): { topic: string; stream: string; payload: PendingSet } {
    // The identifier the receiver added (as it spelt it), when it added one of this party's; else the first.
    const subId = stream.subjects.find((added) => identifiers.some((id) => sameSubject(added, id))) ?? identifiers[0];
    return {
      topic: SSF_TOPIC,
      stream: Transmitter.streamKey(tenant, stream.id),
      payload: {
        tenant,
        streamId: stream.id,
        jti: randomUUID(),
        iat: Math.floor(Date.now() / 1000),
        iss: stream.iss,
        aud: stream.ownerClientId,
        subId,
        events,
      },
    };
  }

  /**
   * The stream as it is now decides: gone or disabled, or its owner no longer a live client, the SET
   * is dropped (SSF 1.0 §8.1.2: a disabled stream's events are not held); paused, it waits (thrown:
   * tried again later).
   */
  private async deliver(entry: OutboxEntry): Promise<void> {
    const pending = entry.payload as PendingSet;
    const stream = await ssfStreams(this.deps.store, pending.tenant).get(pending.streamId);
    if (!stream || stream.status === 'disabled') return;
    if (!(await ownedByLiveClient(this.deps.store, pending.tenant, stream))) return;
    if (stream.status === 'paused') throw new Error('the stream is paused');
    const set = await signedSet(this.deps.store, this.deps.sealer, pending);
    if (stream.deliveryMethod === PUSH) await this.push(stream, set, pending.jti);
    else await this.queue(pending, entry.id, set);
  }

  /**
   * RFC 8935 §2: POST the SET; a 2xx is delivered. A 400 is the receiver's refusal of this SET
   * (§2.3: `err` says why): retrying would not change it, so it is logged and dropped. Anything
   * else (no answer, 5xx, 401 while its credentials change) is tried again with back-off.
   */
  private async push(stream: StreamRecord, set: string, jti: string): Promise<void> {
    const headers: Record<string, string> = {
      'content-type': 'application/secevent+jwt',
      accept: 'application/json',
    };
    if (stream.authorizationHeader) headers.authorization = this.deps.sealer.unseal(stream.authorizationHeader);
    // RFC 8935 needs no redirect: one hop, within OUTBOUND_TIMEOUT_MS, so that a slow receiver holds the topic's lane no longer.
    const response = await this.deps.outbound.fetch(stream.endpointUrl, {
      method: 'POST',
      headers,
      body: set,
      redirect: 'error',
    });
    const text = await response.text().catch(() => '');
    if (response.ok) return;
    if (response.status === 400) {
      this.deps.log.warn(
        { streamId: stream.id, jti, receiverError: errorCodeOf(text) },
        'a push receiver refused a SET; it is not sent again',
      );
      return;
    }
    throw new Error(`the push receiver answered ${response.status}`);
  }

  private async queue(pending: PendingSet, seq: number, set: string): Promise<void> {
    const polled = ssfPolled(this.deps.store, pending.tenant);
    if ((await polled.count({ streamId: pending.streamId }, undefined, POLL_QUEUE_MAX)) >= POLL_QUEUE_MAX)
      throw new Error('the poll receiver has not acknowledged its SETs');
    // At least once: a SET queued before a crash is queued again under the same jti (kept once).
    await polled.upsert({ id: pending.jti, streamId: pending.streamId, seq, set });
  }
}

/** A party's subject identifiers, never none: the preferred one first. */
type SubjectIds = [SubjectId, ...SubjectId[]];

/** A party's subject identifiers as a stream under `iss` knows them, the preferred one first. */
export function identifiersOf(party: EventParty, iss: string): SubjectIds {
  if (party.kind === 'client') return [{ format: 'opaque', id: party.clientId }];
  const identifiers: SubjectIds = [{ format: 'iss_sub', iss, sub: party.sub }];
  if (party.email) identifiers.push({ format: 'email', email: party.email });
  return identifiers;
}

/** RFC 8935 §2.3's `err` code of a refusal, when the body is one (never the body itself: it is the receiver's text). */
function errorCodeOf(text: string): string | null {
  try {
    const parsed = JSON.parse(text) as { err?: unknown };
    return typeof parsed.err === 'string' ? parsed.err.slice(0, 64) : null;
  } catch {
    return null;
  }
}
