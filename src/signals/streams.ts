import { clientRecords } from '../catalog/index.js';
import { looksLikeDocumentUrl } from '../oauth/index.js';
import type { Sealer, Store, StoredDoc } from '../store/index.js';
import { SSF_STREAMS_COLLECTION } from './collections.js';

/** The delivery methods of SSF 1.0 §6.1: RFC 8935 push and RFC 8936 poll. */
export const PUSH = 'urn:ietf:rfc:8935';
export const POLL = 'urn:ietf:rfc:8936';

/** The event types this transmitter emits (SSF 1.0, CAEP 1.0, RISC 1.0). */
export const EVENT_TYPES = {
  sessionRevoked: 'https://schemas.openid.net/secevent/caep/event-type/session-revoked',
  credentialChange: 'https://schemas.openid.net/secevent/caep/event-type/credential-change',
  tokenClaimsChange: 'https://schemas.openid.net/secevent/caep/event-type/token-claims-change',
  accountDisabled: 'https://schemas.openid.net/secevent/risc/event-type/account-disabled',
  accountEnabled: 'https://schemas.openid.net/secevent/risc/event-type/account-enabled',
  verification: 'https://schemas.openid.net/secevent/ssf/event-type/verification',
  streamUpdated: 'https://schemas.openid.net/secevent/ssf/event-type/stream-updated',
} as const;

/** What a receiver may ask for; verification and stream-updated go to every stream (SSF 1.0 §8.1.4, §8.1.5). */
export const EVENTS_SUPPORTED: string[] = [
  EVENT_TYPES.sessionRevoked,
  EVENT_TYPES.credentialChange,
  EVENT_TYPES.tokenClaimsChange,
  EVENT_TYPES.accountDisabled,
  EVENT_TYPES.accountEnabled,
];
const ALWAYS_DELIVERED: string[] = [EVENT_TYPES.verification, EVENT_TYPES.streamUpdated];

export type StreamStatus = 'enabled' | 'paused' | 'disabled';

/**
 * An RFC 9493 subject identifier as this transmitter uses it: `iss_sub` and `email` for users,
 * `opaque` for clients (the `id` is the client_id: RFC 9493 has no client format, and a receiver
 * that knows the client_id matches it as it is).
 */
export type SubjectId =
  | { format: 'iss_sub'; iss: string; sub: string }
  | { format: 'email'; email: string }
  | { format: 'opaque'; id: string };

export interface StreamRecord extends StoredDoc {
  id: string;
  ownerClientId: string;
  /** The owner's client record (absent on streams made before it was kept): a client made again under its client_id is another. */
  ownerRecordId?: number;
  /** The issuer the receiver created the stream under (its SETs' `iss`, and where their keys are). */
  iss: string;
  deliveryMethod: typeof PUSH | typeof POLL;
  endpointUrl: string;
  /** A push stream's Authorization header value, sealed (src/store/sealed.ts): never in clear. */
  authorizationHeader: string | null;
  eventsRequested: string[];
  description: string | null;
  /** `ALL`: every subject of the tenant; `NONE`: only the subjects added (SSF 1.0 §7.1 default_subjects). */
  defaultSubjects: 'ALL' | 'NONE';
  status: StreamStatus;
  reason: string | null;
  subjects: SubjectId[];
  createdAt: string;
  updatedAt: string;
  /**
   * Moves on at every change (absent on a stream no change has written since it was made): a change
   * is written only over the stream it was made from (changeStream), never over a concurrent one.
   */
  revision?: number;
  /** When verification was last requested (epoch ms), for min_verification_interval. */
  verifiedAt?: number;
}

export const ssfStreams = (store: Store, tenant: string) =>
  store.collection<StreamRecord>(SSF_STREAMS_COLLECTION, tenant);

/**
 * Seals every push stream's receiver credential (`authorization_header`) of the tenant again with
 * the sealer's current key (arbiter rotate-secrets-key); answers how many. Found 2026-11-30: the
 * rotation left them under the old key, which then still opened them in any copy of the store,
 * and every push failed once the old key was dropped.
 */
export async function resealStreamCredentials(store: Store, sealer: Sealer, tenant: string): Promise<number> {
  const streams = ssfStreams(store, tenant);
  let resealed = 0;
  for (const stream of await streams.find()) {
    if (typeof stream.authorizationHeader !== 'string') continue;
    await streams.update(stream.id, { authorizationHeader: sealer.reseal(stream.authorizationHeader) });
    resealed += 1;
  }
  return resealed;
}

/** The events a stream gets: what it asked for that this transmitter emits. */
export function eventsDelivered(stream: Pick<StreamRecord, 'eventsRequested'>): string[] {
  return stream.eventsRequested.filter((type) => EVENTS_SUPPORTED.includes(type));
}

/** Whether the stream is to get an event of `type` about `subjects` (any one of the identifiers of one party). */
export function covers(stream: StreamRecord, type: string, subjects: readonly SubjectId[]): boolean {
  if (stream.status === 'disabled') return false;
  if (ALWAYS_DELIVERED.includes(type)) return true;
  if (!eventsDelivered(stream).includes(type)) return false;
  if (stream.defaultSubjects === 'ALL') return true;
  return subjects.some((subject) => stream.subjects.some((added) => sameSubject(added, subject)));
}

export function sameSubject(a: SubjectId, b: SubjectId): boolean {
  if (a.format !== b.format) return false;
  switch (a.format) {
    case 'iss_sub':
      return a.iss === (b as typeof a).iss && a.sub === (b as typeof a).sub;
    case 'email':
      // RFC 9493 §3.2.2: the local part may be case sensitive; domains are not. Compared as given, but for the domain.
      return emailKey(a.email) === emailKey((b as typeof a).email);
    case 'opaque':
      return a.id === (b as typeof a).id;
  }
}

function emailKey(email: string): string {
  const at = email.lastIndexOf('@');
  return at < 0 ? email : `${email.slice(0, at)}@${email.slice(at + 1).toLowerCase()}`;
}

/** The stream configuration as SSF 1.0 §8.1.1 shows it to its receiver (never its Authorization header). */
export function streamConfiguration(stream: StreamRecord, minVerificationInterval: number): Record<string, unknown> {
  return {
    stream_id: stream.id,
    iss: stream.iss,
    aud: stream.ownerClientId,
    delivery: { method: stream.deliveryMethod, endpoint_url: stream.endpointUrl },
    events_supported: EVENTS_SUPPORTED,
    events_requested: stream.eventsRequested,
    events_delivered: eventsDelivered(stream),
    ...(stream.description === null ? {} : { description: stream.description }),
    min_verification_interval: minVerificationInterval,
    default_subjects: stream.defaultSubjects,
  };
}

/**
 * What the tenant's client `clientId` is now, as a stream's owner: `live` while it is an enabled
 * client, with the record a stream it makes is pinned to (`recordId`). A client ID metadata
 * document is pinned to no record: its record is made anew after a day unused, and its expired
 * record is made again on its next use, so it stays live meanwhile (as its tokens do).
 */
export interface StreamOwner {
  live: boolean;
  recordId?: number;
}

export async function streamOwner(store: Store, tenant: string, clientId: string): Promise<StreamOwner> {
  const record = await clientRecords(store, tenant).findOne({ clientId });
  if (!record) return { live: looksLikeDocumentUrl(clientId) };
  if (record.enabled === false) return { live: false };
  return record.registrationType === 'cimd' ? { live: true } : { live: true, recordId: record.id };
}

/** A stream of `clientId` made by an earlier client record under that client_id (one deleted and made again). */
export function madeByEarlierClient(stream: Pick<StreamRecord, 'ownerRecordId'>, owner: StreamOwner): boolean {
  return stream.ownerRecordId !== undefined && owner.recordId !== undefined && stream.ownerRecordId !== owner.recordId;
}

/**
 * Whether a stream still belongs to its owner: the client that made it, still enabled. Found
 * 2026-11-29: a client disabled or deleted kept getting the tenant's events, and a client made
 * again under its client_id took its stream over. `owners` keeps what was read for one pass.
 */
export async function ownedByLiveClient(
  store: Store,
  tenant: string,
  stream: Pick<StreamRecord, 'ownerClientId' | 'ownerRecordId'>,
  owners = new Map<string, Promise<StreamOwner>>(),
): Promise<boolean> {
  let owner = owners.get(stream.ownerClientId);
  if (!owner) owners.set(stream.ownerClientId, (owner = streamOwner(store, tenant, stream.ownerClientId)));
  const now = await owner;
  return now.live && !madeByEarlierClient(stream, now);
}

/** Of these streams, those still owned by their live client (ownedByLiveClient), each owner read once. */
export async function streamsOfLiveOwners<T extends Pick<StreamRecord, 'ownerClientId' | 'ownerRecordId'>>(
  store: Store,
  tenant: string,
  streams: readonly T[],
): Promise<T[]> {
  const owners = new Map<string, Promise<StreamOwner>>();
  const live = await Promise.all(streams.map((stream) => ownedByLiveClient(store, tenant, stream, owners)));
  return streams.filter((_, index) => live[index]);
}
