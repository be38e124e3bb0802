import { auditFactsOf, markAuthenticated } from '../../audit/index.js';
import type { Config } from '../../config/index.js';
import { readText } from '../../http/body.js';
import { HttpError } from '../../http/errors.js';
import { outboundOptionsOf, sharedOutbound } from '../../http/outbound.js';
import { JwksUnavailableError } from '../../http/remote-jwks.js';
import type { Logger } from '../../log/index.js';
import type { Metrics } from '../../metrics/index.js';
import type { ArbiterContext, ArbiterMiddleware, TenantProviders } from '../../oauth/index.js';
import { ConflictError, storageDigest, type Sealer, type Store } from '../../store/index.js';
import { requestIssuer } from '../../tenancy/index.js';
import { actOn, type EventOutcome } from './events.js';
import { PushRefusal, verifiedSet, type VerifiedSet } from './set.js';
import {
  pushingProvider,
  TransmitterKeys,
  TransmitterUnavailableError,
  type TransmittingProvider,
} from './transmitters.js';
import { SSF_RECEIVED_SETS_COLLECTION } from '../collections.js';

/**
 * Where an identity provider's Shared Signals transmitter pushes its Security Event Tokens (RFC
 * 8935): `{issuer}/idp/ssf-events`, or below a tenant's own issuer (`/t/<tenant>/idp/ssf-events`).
 */
export const SSF_RECEIVER_PATH = '/idp/ssf-events';

/** RFC 8935 §2: the media type of a pushed SET. */
const SET_MEDIA_TYPE = 'application/secevent+jwt';
/** A SET is a few hundred bytes; one larger than this (or than MAX_BODY_BYTES) is refused unread. */
const MAX_SET_BYTES = 64 * 1024;

export interface ReceiverDeps {
  config: Config;
  store: Store;
  /** Opens the identity providers' sealed push secrets. */
  sealer: Sealer;
  providers: TenantProviders;
  log: Logger;
  metrics: Metrics;
}

/**
 * The receiver of the tenant's identity providers' signals (SSF 1.0 push delivery): a POST of one
 * SET, authenticated by the push secret of the provider that names the transmitter, verified
 * (./set.ts), its jti refused a second time, then acted on (./events.ts). 202 when accepted;
 * a refusal is RFC 8935 §2.3's JSON `{err, description}`: 401 authentication_failed, 403
 * access_denied (the provider is disabled), 413 for a body too large, 400 for the rest; 503 when
 * the transmitter's keys cannot be fetched (the transmitter tries again). Each push has one audit
 * entry (what it named, what was done) and is counted in /metrics by event and outcome.
 */
export function ssfReceiver(deps: ReceiverDeps): ArbiterMiddleware {
  const keys = new TransmitterKeys(() => sharedOutbound(outboundOptionsOf(deps.config)));
  const maxBytes = Math.min(MAX_SET_BYTES, deps.config.maxBodyBytes);
  return async function receiveSignal(ctx: ArbiterContext): Promise<void> {
    ctx.set('Cache-Control', 'no-store');
    try {
      const outcomes = await receive(ctx, deps, keys, maxBytes);
      for (const outcome of outcomes) deps.metrics.signalReceived(outcome.name, outcome.action);
      // RFC 8935 §2.2: 202 Accepted, no body (set after the null body, which alone would make it a 204).
      ctx.body = null;
      ctx.status = 202;
    } catch (error) {
      const refusal = asRefusal(error, deps.log);
      if (!refusal) throw error;
      deps.metrics.signalReceived('none', refusal.code);
      if (refusal.status === 401) ctx.set('WWW-Authenticate', 'Bearer');
      ctx.state.errorCode = refusal.code;
      ctx.status = refusal.status;
      ctx.body = { err: refusal.code, description: refusal.message };
    }
  };
}

async function receive(
  ctx: ArbiterContext,
  deps: ReceiverDeps,
  keys: TransmitterKeys,
  maxBytes: number,
): Promise<EventOutcome[]> {
  if (ctx.method !== 'POST') {
    ctx.set('Allow', 'POST');
    throw new PushRefusal(405, 'invalid_request', 'SETs are pushed with POST');
  }
  const { tenant } = ctx.state;
  const pushed = await pushingProvider(deps.store, deps.sealer, tenant.name, ctx.get('authorization'));
  if (pushed.kind === 'unknown')
    throw new PushRefusal(
      401,
      'authentication_failed',
      "a push needs Authorization: Bearer <the provider's ssfPushSecret>",
    );
  const facts = auditFactsOf(ctx.state);
  markAuthenticated(ctx.state);
  facts.result = { idp: pushed.idp.idpId };
  if (pushed.kind === 'disabled')
    throw new PushRefusal(403, 'access_denied', `the identity provider ${pushed.idp.idpId} is disabled`);
  if (!ctx.is(SET_MEDIA_TYPE)) {
    ctx.set('Connection', 'close');
    throw new PushRefusal(400, 'invalid_request', `the body must be ${SET_MEDIA_TYPE}`);
  }
  const token = (await readText(ctx, maxBytes)).trim();
  const idp = pushed.idp;
  const audience = idp.ssfAudience ?? requestIssuer(deps.config.issuer, tenant);
  const set = await verifiedSet(token, idp, audience, keys, deps.config.ssfReceiverMaxAgeSeconds);
  const received = await rememberJti(deps, tenant.name, idp, set);
  const outcomes: EventOutcome[] = [];
  try {
    for (const event of set.events) outcomes.push(await actOn(deps, tenant, idp, event));
  } catch (error) {
    // Not acted on (the store failed meanwhile: a 503): the transmitter's retry must not be refused as a repeat.
    await received.forget().catch(() => undefined);
    throw error;
  }
  const subjects = [...new Set(outcomes.flatMap((outcome) => outcome.subjects))];
  facts.subjectId = subjects[0] ?? null;
  facts.result = {
    idp: idp.idpId,
    jti: set.jti,
    events: outcomes.map((outcome) => outcome.name).join(' '),
    actions: outcomes.map((outcome) => outcome.action).join(' '),
    revoked: String(outcomes.reduce((sum, outcome) => sum + outcome.revoked, 0)),
  };
  return outcomes;
}

/** A jti this transmitter already pushed is refused: a SET is acted on once. `forget` undoes it, for a SET not acted on. */
async function rememberJti(
  deps: ReceiverDeps,
  tenant: string,
  idp: TransmittingProvider,
  set: Pick<VerifiedSet, 'jti' | 'acceptedUntil'>,
): Promise<{ forget(): Promise<unknown> }> {
  const received = deps.store.collection(SSF_RECEIVED_SETS_COLLECTION, tenant);
  const id = storageDigest(`${idp.id} ${set.jti}`);
  try {
    await received.insert({
      id,
      // As long as the SET itself could be accepted, and never less than the maximum age from now.
      expiresAt: Math.max(set.acceptedUntil, Date.now() + deps.config.ssfReceiverMaxAgeSeconds * 1000),
    });
  } catch (error) {
    if (error instanceof ConflictError)
      throw new PushRefusal(400, 'invalid_request', 'a SET with this jti was already received');
    throw error;
  }
  return { forget: () => received.delete(id) };
}

/** What the caller is told, RFC 8935's way; null for a fault of Arbiter's own (a 500, or the store's 503). */
function asRefusal(error: unknown, log: Logger): PushRefusal | null {
  if (error instanceof PushRefusal) return error;
  // readText: a body too large (413) or cut short (400, 408).
  if (error instanceof HttpError && error.status < 500)
    return new PushRefusal(error.status, 'invalid_request', error.message);
  if (error instanceof JwksUnavailableError || error instanceof TransmitterUnavailableError) {
    log.warn({ reason: error.message }, 'a pushed SET could not be verified: the transmitter keys are unavailable');
    throw new HttpError(503, 'temporarily_unavailable', `${error.message}: the SET cannot be verified now`);
  }
  return null;
}
