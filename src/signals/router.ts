import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import { recordDecision } from '../audit/index.js';
import { readJsonBody } from '../http/body.js';
import { badRequest, HttpError, notFound } from '../http/errors.js';
import { assertFetchableUrl, OutboundRefusedError } from '../http/outbound.js';
import { routedApi, type RoutedApi } from '../http/router.js';
import { assertValid } from '../http/validation.js';
import type { Outbox } from '../outbox/index.js';
import { enforceHttp, requestInput, type InputParties, type PolicyEngine, type SsfInput } from '../policy/index.js';
import type { Sealer, Store, TenantCollection } from '../store/index.js';
import { requestIssuer } from '../tenancy/index.js';
import type { ApiContext, ApiState, TokenCallers } from '../uma/index.js';
import {
  STATUS_UPDATE,
  STREAM_REQUEST,
  STREAM_UPDATE,
  SUBJECT_REQUEST,
  VERIFY_REQUEST,
  POLL_REQUEST,
} from './schemas.js';
import type { PollRequest, StreamRequest, SubjectRequest } from './schemas.js';
import {
  EVENTS_SUPPORTED,
  madeByEarlierClient,
  ownedByLiveClient,
  streamOwner,
  streamsOfLiveOwners,
  type StreamOwner,
  POLL,
  PUSH,
  sameSubject,
  ssfStreams,
  streamConfiguration,
  type StreamRecord,
  type SubjectId,
} from './streams.js';
import { ssfPolled, Transmitter } from './transmitter.js';

export const SSF_CONFIGURATION_PATH = '/.well-known/ssf-configuration';

export const SSF_PATHS = {
  configuration_endpoint: '/ssf/streams',
  status_endpoint: '/ssf/status',
  add_subject_endpoint: '/ssf/subjects/add',
  remove_subject_endpoint: '/ssf/subjects/remove',
  verification_endpoint: '/ssf/verify',
} as const;
const POLL_PATH = '/ssf/poll';

/**
 * A stream covers every subject of the tenant unless it says NONE (then only those added): the
 * CAEP Interoperability Profile has receivers assume all subjects without adding any. Which
 * receivers may have such streams is the `ssf` policy's to decide.
 */
const DEFAULT_SUBJECTS = 'ALL';

/** Bounds: a receiver's streams, a stream's subjects, an unanswered poll's wait step. */
const STREAMS_PER_RECEIVER = 10;
/** Streams of one client_id read to count its own: its own (at most STREAMS_PER_RECEIVER) and those earlier clients under it left. */
const ORPHANS_READ_AT_MOST = 1000;
const SUBJECTS_PER_STREAM = 1_000;
/** SSF 1.0 §8.1.4: the least time between two verification requests of one stream. */
export const MIN_VERIFICATION_INTERVAL_SECONDS = 5;

export interface SignalsDeps {
  store: Store;
  sealer: Sealer;
  policy: PolicyEngine;
  callers: TokenCallers;
  parties: InputParties;
  issuer: string;
  maxBodyBytes: number;
  transmitter: Transmitter;
  outbox: Outbox;
  /** Development and tests: push endpoints over http to loopback (OUTBOUND_ALLOW_INSECURE_LOOPBACK). */
  allowInsecureLoopback: boolean;
  /** The longest an RFC 8936 poll without returnImmediately is held (SSF_POLL_WAIT_SECONDS). */
  pollWaitSeconds: number;
}

type Operation = SsfInput['operation'];
const READS: Operation[] = ['read', 'status_read', 'poll'];

/**
 * The OpenID Shared Signals Framework 1.0 transmitter of each tenant: its metadata, the stream
 * management API (SSF 1.0 §8) for receivers that are clients of the tenant (scope `ssf.manage`;
 * `ssf.read` reads and polls), each operation decided by the `ssf` point, and RFC 8936 polling.
 */
export function signalsRouter(deps: SignalsDeps): RoutedApi<ApiState> {
  const router = new Router<ApiState>({ sensitive: true, strict: true });
  const streams = (ctx: ApiContext) => ssfStreams(deps.store, ctx.state.tenant.name);
  /**
   * How many streams the receiver holds. Those an earlier client under its client_id made are
   * deleted first: nothing else would (the client's deletion is not Signals' to see), and they
   * would fill its STREAMS_PER_RECEIVER for good (found 2026-11-29).
   */
  const ownStreams = async (ctx: ApiContext, owner: StreamOwner, receiver: string): Promise<number> => {
    const all = await streams(ctx).find({ ownerClientId: receiver }, { limit: ORPHANS_READ_AT_MOST });
    const earlier = all.filter((stream) => madeByEarlierClient(stream, owner));
    for (const stream of earlier) await deleteStream(ctx, stream.id);
    return all.length - earlier.length;
  };
  /** A stream gone with what waits for it: its SETs in the outbox and in its poll queue. */
  const deleteStream = async (ctx: ApiContext, streamId: string): Promise<void> => {
    await streams(ctx).delete(streamId);
    await deps.outbox.discard(Transmitter.streamKey(ctx.state.tenant.name, streamId));
    await ssfPolled(deps.store, ctx.state.tenant.name).deleteMany({ streamId });
  };
  const heldPolls = new HeldPolls();

  router.get(SSF_CONFIGURATION_PATH, (ctx) => {
    ctx.body = metadata(requestIssuer(deps.issuer, ctx.state.tenant));
  });

  router.post(SSF_PATHS.configuration_endpoint, async (ctx) => {
    const receiver = await receiverOf(ctx, deps, 'create');
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<StreamRequest>(STREAM_REQUEST, body);
    const owner = await streamOwner(deps.store, ctx.state.tenant.name, receiver);
    const owned = await ownStreams(ctx, owner, receiver);
    if (owned >= STREAMS_PER_RECEIVER)
      throw new HttpError(409, 'conflict', `a receiver has at most ${STREAMS_PER_RECEIVER} streams`);
    const iss = requestIssuer(deps.issuer, ctx.state.tenant);
    const now = new Date().toISOString();
    const id = randomUUID();
    const stream: StreamRecord = {
      id,
      ownerClientId: receiver,
      ...(owner.recordId === undefined ? {} : { ownerRecordId: owner.recordId }),
      iss,
      ...delivery(deps, body, iss, id),
      eventsRequested: body.events_requested ?? [],
      description: body.description ?? null,
      defaultSubjects: body.default_subjects ?? DEFAULT_SUBJECTS,
      status: 'enabled',
      reason: null,
      subjects: [],
      createdAt: now,
      updatedAt: now,
    };
    await decide(ctx, deps, { operation: 'create', stream: { ...stream, id: null }, body });
    await streams(ctx).insert(stream);
    ctx.status = 201;
    ctx.body = streamConfiguration(stream, MIN_VERIFICATION_INTERVAL_SECONDS);
  });

  router.get(SSF_PATHS.configuration_endpoint, async (ctx) => {
    const receiver = await receiverOf(ctx, deps, 'read');
    const streamId = ctx.query.stream_id;
    if (typeof streamId === 'string') {
      const stream = await ownedStream(ctx, deps, receiver, streamId);
      await decide(ctx, deps, { operation: 'read', stream });
      ctx.body = streamConfiguration(stream, MIN_VERIFICATION_INTERVAL_SECONDS);
      return;
    }
    const owned = await streams(ctx).find({ ownerClientId: receiver }, { limit: STREAMS_PER_RECEIVER });
    const all = await streamsOfLiveOwners(deps.store, ctx.state.tenant.name, owned);
    for (const stream of all) await decide(ctx, deps, { operation: 'read', stream });
    ctx.body = all.map((stream) => streamConfiguration(stream, MIN_VERIFICATION_INTERVAL_SECONDS));
  });

  // SSF 1.0 §8.1.1.3 (PATCH: the fields given change) and §8.1.1.4 (PUT: the configuration is replaced).
  for (const [method, operation] of [
    ['patch', 'update'],
    ['put', 'replace'],
  ] as const) {
    router[method](SSF_PATHS.configuration_endpoint, async (ctx) => {
      const receiver = await receiverOf(ctx, deps, operation);
      const body = await readJsonBody(ctx, deps.maxBodyBytes);
      assertValid<StreamRequest & { stream_id: string }>(operation === 'update' ? STREAM_UPDATE : STREAM_REQUEST, body);
      if (typeof body.stream_id !== 'string') throw badRequest('stream_id is required', { field: 'stream_id' });
      const stream = await ownedStream(ctx, deps, receiver, body.stream_id);
      const given = operation === 'replace' || body.delivery !== undefined;
      // Only the configuration is written: a status, subjects or verification time changed meanwhile stay.
      const configuration: Partial<StreamRecord> = {
        ...(given ? delivery(deps, body, stream.iss, stream.id, stream) : {}),
        eventsRequested: body.events_requested ?? (operation === 'replace' ? [] : stream.eventsRequested),
        description: body.description ?? (operation === 'replace' ? null : stream.description),
        defaultSubjects: body.default_subjects ?? (operation === 'replace' ? DEFAULT_SUBJECTS : stream.defaultSubjects),
      };
      await decide(ctx, deps, { operation, stream: { ...stream, ...configuration }, body });
      ctx.body = streamConfiguration(
        await changeStream(streams(ctx), stream, configuration),
        MIN_VERIFICATION_INTERVAL_SECONDS,
      );
    });
  }

  router.delete(SSF_PATHS.configuration_endpoint, async (ctx) => {
    const receiver = await receiverOf(ctx, deps, 'delete');
    const stream = await ownedStream(ctx, deps, receiver, requiredStreamId(ctx.query.stream_id));
    await decide(ctx, deps, { operation: 'delete', stream });
    await deleteStream(ctx, stream.id);
    ctx.status = 204;
  });

  router.get(SSF_PATHS.status_endpoint, async (ctx) => {
    const receiver = await receiverOf(ctx, deps, 'status_read');
    const stream = await ownedStream(ctx, deps, receiver, requiredStreamId(ctx.query.stream_id));
    await decide(ctx, deps, { operation: 'status_read', stream });
    ctx.body = statusOf(stream);
  });

  router.post(SSF_PATHS.status_endpoint, async (ctx) => {
    const receiver = await receiverOf(ctx, deps, 'status_update');
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<{ stream_id: string; status: StreamRecord['status']; reason?: string }>(STATUS_UPDATE, body);
    const stream = await ownedStream(ctx, deps, receiver, body.stream_id);
    const changed = { ...stream, status: body.status, reason: body.reason ?? null };
    await decide(ctx, deps, { operation: 'status_update', stream: changed, body });
    await changeStream(streams(ctx), stream, { status: changed.status, reason: changed.reason });
    // Enabled again: what waited while it was paused goes now, not after its back-off.
    if (changed.status === 'enabled' && stream.status !== 'enabled')
      await deps.outbox.retryNow(Transmitter.streamKey(ctx.state.tenant.name, stream.id));
    ctx.body = statusOf(changed);
  });

  /** A subject add or remove, allowed by policy: the receiver's stream as it is, and the subject. */
  const subjectChange = async (ctx: ApiContext, operation: 'subject_add' | 'subject_remove') => {
    const receiver = await receiverOf(ctx, deps, operation);
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<SubjectRequest>(SUBJECT_REQUEST, body);
    const stream = await ownedStream(ctx, deps, receiver, body.stream_id);
    const subject = body.subject as SubjectId;
    await decide(ctx, deps, { operation, stream, subject, body });
    return { stream, subject };
  };

  router.post(SSF_PATHS.add_subject_endpoint, async (ctx) => {
    const { stream, subject } = await subjectChange(ctx, 'subject_add');
    await changeSubjects(streams(ctx), stream, (subjects) => {
      if (subjects.some((added) => sameSubject(added, subject))) return null;
      if (subjects.length >= SUBJECTS_PER_STREAM)
        throw badRequest(`a stream has at most ${SUBJECTS_PER_STREAM} subjects`, { field: 'subject' });
      return [...subjects, subject];
    });
    ctx.status = 200;
    ctx.body = {};
  });

  router.post(SSF_PATHS.remove_subject_endpoint, async (ctx) => {
    const { stream, subject } = await subjectChange(ctx, 'subject_remove');
    await changeSubjects(streams(ctx), stream, (subjects) => {
      const kept = subjects.filter((added) => !sameSubject(added, subject));
      if (kept.length === subjects.length) throw notFound('the subject is not in the stream');
      return kept;
    });
    ctx.status = 204;
  });

  router.post(SSF_PATHS.verification_endpoint, async (ctx) => {
    const receiver = await receiverOf(ctx, deps, 'verify');
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<{ stream_id: string; state?: string }>(VERIFY_REQUEST, body);
    const stream = await ownedStream(ctx, deps, receiver, body.stream_id);
    await decide(ctx, deps, { operation: 'verify', stream, body });
    const last = typeof stream.verifiedAt === 'number' ? stream.verifiedAt : 0;
    // Written only over the time read: of two requests at once, one verifies, the other is within the interval.
    const intervalPassed =
      Date.now() - last >= MIN_VERIFICATION_INTERVAL_SECONDS * 1000 &&
      (await streams(ctx).update(stream.id, { verifiedAt: Date.now() }, { verifiedAt: stream.verifiedAt ?? null })) !==
        null;
    if (!intervalPassed) throw tooSoon(ctx, 'verification was requested within min_verification_interval');
    if (!(await deps.transmitter.verify(ctx.state.tenant.name, stream, body.state)))
      throw tooSoon(
        ctx,
        'the stream has SETs waiting to be delivered: verify once they are (is the stream paused, or its receiver down?)',
      );
    ctx.status = 204;
  });

  router.post(`${POLL_PATH}/:streamId`, async (ctx) => {
    const receiver = await receiverOf(ctx, deps, 'poll');
    const stream = await ownedStream(ctx, deps, receiver, String(ctx.params.streamId));
    if (stream.deliveryMethod !== POLL) throw badRequest('this stream is delivered by push, not polled');
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<PollRequest>(POLL_REQUEST, body);
    await decide(ctx, deps, { operation: 'poll', stream, body });
    ctx.body = await poll(ctx, deps, stream, body, heldPolls);
  });

  return routedApi(router);
}

/** SSF 1.0 §7.1: the transmitter configuration metadata of the tenant whose issuer is `issuer`. */
function metadata(issuer: string): Record<string, unknown> {
  return {
    spec_version: '1_0',
    issuer,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    delivery_methods_supported: [PUSH, POLL],
    ...Object.fromEntries(Object.entries(SSF_PATHS).map(([field, path]) => [field, `${issuer}${path}`])),
    authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6749' }],
    default_subjects: DEFAULT_SUBJECTS,
  };
}

/** The receiver: the client of a Bearer token with `ssf.manage` (or `ssf.read`, for reads). */
async function receiverOf(ctx: ApiContext, deps: SignalsDeps, operation: Operation): Promise<string> {
  const scope = READS.includes(operation) ? ['ssf.manage', 'ssf.read'] : 'ssf.manage';
  return (await deps.callers(ctx, { scope })).clientId;
}

/** The caller's stream; another receiver's is as unknown as one that does not exist. */
async function ownedStream(ctx: ApiContext, deps: SignalsDeps, receiver: string, streamId: string) {
  const stream = await ssfStreams(deps.store, ctx.state.tenant.name).get(streamId);
  // A stream of an earlier client under the same client_id is not this one's (ownedByLiveClient).
  if (
    !stream ||
    stream.ownerClientId !== receiver ||
    !(await ownedByLiveClient(deps.store, ctx.state.tenant.name, stream))
  )
    throw notFound('no stream with this stream_id is the caller’s');
  return stream;
}

function requiredStreamId(value: unknown): string {
  if (typeof value !== 'string' || value === '') throw badRequest('stream_id is required', { field: 'stream_id' });
  return value;
}

/**
 * A stream's delivery: push to the receiver's https endpoint (checked as the outbound guard
 * will check it, so that a stream that can never be delivered is refused now), with its
 * Authorization header sealed; poll at this transmitter's own endpoint for the stream.
 */
function delivery(
  deps: SignalsDeps,
  body: StreamRequest,
  iss: string,
  id: string,
  current?: StreamRecord,
): Pick<StreamRecord, 'deliveryMethod' | 'endpointUrl' | 'authorizationHeader'> {
  const method = body.delivery?.method ?? current?.deliveryMethod ?? POLL;
  if (method === POLL)
    return { deliveryMethod: POLL, endpointUrl: `${iss}${POLL_PATH}/${id}`, authorizationHeader: null };
  const endpoint = body.delivery?.endpoint_url;
  if (typeof endpoint !== 'string')
    throw badRequest('a push stream needs delivery.endpoint_url', { field: 'delivery.endpoint_url' });
  try {
    assertFetchableUrl(endpoint, deps.allowInsecureLoopback);
  } catch (error) {
    if (error instanceof OutboundRefusedError || error instanceof TypeError)
      throw badRequest(`delivery.endpoint_url cannot be pushed to: ${error.message}`, {
        field: 'delivery.endpoint_url',
      });
    throw error;
  }
  const header = body.delivery?.authorization_header;
  return {
    deliveryMethod: PUSH,
    endpointUrl: endpoint,
    authorizationHeader: typeof header === 'string' ? deps.sealer.seal(header) : null,
  };
}

function statusOf(stream: Pick<StreamRecord, 'id' | 'status' | 'reason'>) {
  return { stream_id: stream.id, status: stream.status, ...(stream.reason ? { reason: stream.reason } : {}) };
}

interface Asked {
  operation: Operation;
  /** As it would be after the operation (create, update, replace, status_update), else as it is. */
  stream: Pick<
    StreamRecord,
    'ownerClientId' | 'deliveryMethod' | 'endpointUrl' | 'eventsRequested' | 'defaultSubjects' | 'status'
  > & { id: string | null };
  subject?: SubjectId;
  /** The request's JSON body (none for GET and DELETE: their query is the parameters). */
  body?: unknown;
}

/** The `ssf` decision of one operation: allowed, or the policy's refusal thrown (403 for access_denied and unauthorized_client). */
async function decide(ctx: ApiContext, deps: SignalsDeps, { operation, stream, subject, body }: Asked): Promise<void> {
  const tenant = ctx.state.tenant.name;
  const client = await deps.parties.client(tenant, stream.ownerClientId, 'bearer');
  if (!client) throw new HttpError(401, 'invalid_client', 'the client of this token no longer exists');
  const outcome = await deps.policy.decide('ssf', {
    tenant,
    client,
    subject: null,
    request: requestInput({
      endpoint: ctx.path,
      method: ctx.method,
      parameters: body === undefined ? { ...ctx.query } : shownBody(body),
    }),
    ssf: {
      operation,
      stream: {
        stream_id: stream.id,
        owner_client_id: stream.ownerClientId,
        delivery_method: stream.deliveryMethod,
        endpoint_url: stream.endpointUrl,
        events_requested: stream.eventsRequested,
        default_subjects: stream.defaultSubjects,
        status: stream.status,
      },
      subject: subject ?? null,
    },
    time: new Date().toISOString(),
  });
  recordDecision(ctx.state, outcome);
  enforceHttp.http(outcome, {
    statusOf: (code) => (code === 'access_denied' || code === 'unauthorized_client' ? 403 : 400),
  });
}

/** The request body as the policy sees it: a push stream's Authorization header is a credential, left out. */
function shownBody(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null) return {};
  const { delivery: given, ...rest } = body as Record<string, unknown>;
  if (typeof given !== 'object' || given === null) return rest;
  const { authorization_header: _secret, ...shown } = given as Record<string, unknown>;
  return { ...rest, delivery: shown };
}

/**
 * The streams whose poll this process holds open: one at a time per stream, so that a receiver
 * cannot have the store read every 200 ms by as many held polls as it opens (a receiver has at
 * most STREAMS_PER_RECEIVER streams).
 */
class HeldPolls {
  private readonly held = new Set<string>();

  /** Takes the stream's one place (the function gives it back), or null while another poll of it is held. */
  take(tenant: string, streamId: string): (() => void) | null {
    const key = JSON.stringify([tenant, streamId]);
    if (this.held.has(key)) return null;
    this.held.add(key);
    return () => this.held.delete(key);
  }
}

/**
 * RFC 8936 §2.4: acknowledge (and forget) what the receiver names, then answer up to `maxEvents`
 * SETs in the order of their changes. Without `returnImmediately`, an empty answer waits (for
 * at most SSF_POLL_WAIT_SECONDS) until a SET is queued, one such poll per stream at a time, and no
 * longer than its receiver stays connected.
 */
async function poll(ctx: ApiContext, deps: SignalsDeps, stream: StreamRecord, body: PollRequest, heldPolls: HeldPolls) {
  const polled = ssfPolled(deps.store, ctx.state.tenant.name);
  for (const jti of [...(body.ack ?? []), ...Object.keys(body.setErrs ?? {})]) {
    const held = await polled.get(jti);
    if (held?.streamId === stream.id) await polled.delete(jti);
  }
  const maxEvents = body.maxEvents ?? 100;
  const waitMs = body.returnImmediately === false && maxEvents > 0 ? deps.pollWaitSeconds * 1000 : 0;
  if (waitMs === 0) return sendSets(polled, stream, maxEvents, Date.now(), ctx);
  const release = heldPolls.take(ctx.state.tenant.name, stream.id);
  if (!release) {
    ctx.set('Retry-After', '1');
    throw new HttpError(
      429,
      'too_many_requests',
      'another poll of this stream is held open: poll with one request at a time, or with returnImmediately',
    );
  }
  try {
    return await sendSets(polled, stream, maxEvents, Date.now() + waitMs, ctx);
  } finally {
    release();
  }
}

/** Up to `maxEvents` of the stream's queued SETs, oldest first; none queued, looks again until `deadline`. */
async function sendSets(
  polled: ReturnType<typeof ssfPolled>,
  stream: StreamRecord,
  maxEvents: number,
  deadline: number,
  ctx: ApiContext,
) {
  for (;;) {
    const found =
      maxEvents === 0
        ? []
        : await polled.find(
            { streamId: stream.id },
            { sort: { field: 'seq', direction: 'asc' }, limit: maxEvents + 1 },
          );
    if (found.length > 0 || Date.now() >= deadline || maxEvents === 0 || ctx.req.socket.destroyed) {
      const answered = found.slice(0, maxEvents);
      return {
        sets: Object.fromEntries(answered.map((held) => [held.id, held.set])),
        moreAvailable: found.length > maxEvents,
      };
    }
    // A bounded wait for the next SET: polls the store, so that a SET queued by any node is seen.
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** How often a subject change is made again over a stream another request changed meanwhile. */
const SUBJECT_CHANGE_ATTEMPTS = 20;

/**
 * Writes `fields` over the stream as it was read (its revision), moving the revision on: a change
 * made from a stream another request has changed since is refused (409), never written over that
 * change (a status, a subject, a delivery lost without a word).
 */
async function changeStream(
  streams: TenantCollection<StreamRecord>,
  stream: StreamRecord,
  fields: Partial<StreamRecord>,
): Promise<StreamRecord> {
  const changed = await writtenOver(streams, stream, fields);
  if (!changed)
    throw new HttpError(409, 'conflict', 'the stream changed meanwhile: read it again, then make the change');
  return changed;
}

/** `fields` written over the stream if it is still at the revision read (the revision moved on); null when it is not. */
function writtenOver(
  streams: TenantCollection<StreamRecord>,
  stream: StreamRecord,
  fields: Partial<StreamRecord>,
): Promise<StreamRecord | null> {
  return streams.update(
    stream.id,
    { ...fields, revision: (stream.revision ?? 0) + 1, updatedAt: new Date().toISOString() },
    { revision: stream.revision ?? null },
  );
}

/** A 429 for a verification asked too soon, with the interval to wait as Retry-After. */
function tooSoon(ctx: ApiContext, description: string): HttpError {
  ctx.set('Retry-After', String(MIN_VERIFICATION_INTERVAL_SECONDS));
  return new HttpError(429, 'too_many_requests', description);
}

/**
 * A subject added or removed: `change` of the stream's subjects as they are now (null: nothing to
 * change), made again over the stream as another request left it (adds at once are all kept).
 */
async function changeSubjects(
  streams: TenantCollection<StreamRecord>,
  read: StreamRecord,
  change: (subjects: SubjectId[]) => SubjectId[] | null,
): Promise<void> {
  let stream: StreamRecord | null = read;
  for (let attempt = 0; attempt < SUBJECT_CHANGE_ATTEMPTS && stream; attempt += 1) {
    const subjects = change(stream.subjects);
    if (!subjects || (await writtenOver(streams, stream, { subjects }))) return;
    stream = await streams.get(read.id);
  }
  if (!stream) throw notFound('no stream with this stream_id is the caller’s');
  throw new HttpError(409, 'conflict', 'the stream kept changing meanwhile: make the change again');
}

export { EVENTS_SUPPORTED };
