import type { Context, Middleware } from 'koa';
import { nameCredential } from '../../http/auth-failures.js';
import { bearerMatches } from '../../http/bearer.js';
import type { Logger } from '../../log/index.js';
import { etagOf } from './build.js';
import type { PolicySnapshots } from './snapshots.js';

export const BUNDLE_PATH = '/policy/bundle.tar.gz';

/** Whom wrong bundle tokens count against in the failure limiter (src/http/auth-failures.ts). */
const BUNDLE_TOKEN_IDENTITY = 'policy-bundle';

/** OPA keeps long polling only while answers carry this media type (OPA's "HTTP Long Polling"). */
const LONG_POLL_TYPE = 'application/vnd.openpolicyagent.bundles';
/** A held request is answered after at most this long (and a second before OPA's own timeout). */
const MAX_HOLD_SECONDS = 30;
/**
 * How often a held request looks at the store: a change made by another process or node is seen
 * within this; at once where the store announces policy writes (PostgreSQL), and for this
 * process's own writes on SQLite (PolicySnapshots.nextChange). A look reads the store only after
 * a write (loadPolicyLayers holds the records while they are unchanged). Each look is a wake-up of
 * an idle server: at 100 ms they were most of what it did while nobody called.
 */
const RECHECK_MS = 250;

/**
 * GET /policy/bundle.tar.gz for OPA's bundle plugin: bearer-protected (behind the failure limiter,
 * which answers wrong tokens 429 once they fail too often), with an ETag so that OPA's polls of
 * an unchanged policy set cost a 304 and no download. With HTTP long polling (OPA sends
 * `Prefer: wait=<seconds>` and the ETag it has), an unchanged bundle is not answered at once:
 * the request is held until the store's revision changes (written on this node or another), so
 * that a policy change is in force everywhere within a fraction of a second.
 */
export function bundleMiddleware(snapshots: PolicySnapshots, bundleToken: string, log: Logger): Middleware {
  return async function bundle(ctx) {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD')
      return reply(ctx, 405, 'invalid_request', 'use GET', { Allow: 'GET, HEAD' });
    nameCredential(ctx, BUNDLE_TOKEN_IDENTITY);
    if (!bearerMatches(ctx.get('authorization'), bundleToken)) {
      return reply(
        ctx,
        401,
        'invalid_token',
        'the policy bundle requires Authorization: Bearer <POLICY_BUNDLE_TOKEN>',
        { 'WWW-Authenticate': 'Bearer' },
      );
    }
    try {
      await serveBundle(ctx, snapshots);
    } catch (error) {
      log.error({ err: error }, 'policy bundle could not be built');
      reply(ctx, 503, 'temporarily_unavailable', 'the policy bundle could not be built', { 'Retry-After': '5' });
    }
  };
}

async function serveBundle(ctx: Context, snapshots: PolicySnapshots): Promise<void> {
  const wait = requestedWait(ctx.get('prefer'));
  let snapshot = await snapshots.current();
  if (wait > 0 && matchesIfNoneMatch(ctx.get('if-none-match'), etagOf(snapshot.revision))) {
    snapshot = await heldUntilChanged(ctx, snapshots, snapshot, wait);
  }
  const etag = etagOf(snapshot.revision);
  if (matchesIfNoneMatch(ctx.get('if-none-match'), etag)) {
    // Written by hand: Koa drops Content-Type from a 304, and OPA stops long polling without it.
    ctx.respond = false;
    ctx.res.writeHead(304, {
      ETag: etag,
      'Cache-Control': 'no-cache',
      ...(wait > 0 ? { 'Content-Type': LONG_POLL_TYPE } : {}),
    });
    ctx.res.end();
    return;
  }
  const body = await snapshots.bundle(snapshot);
  ctx.set('ETag', etag);
  ctx.set('Cache-Control', 'no-cache');
  ctx.status = 200;
  ctx.type = wait > 0 ? LONG_POLL_TYPE : 'application/gzip';
  ctx.body = body;
}

/** The `wait` of `Prefer: wait=<seconds>` (RFC 7240), held at most MAX_HOLD_SECONDS less the margin; 0 without one. */
function requestedWait(prefer: string): number {
  const match = /(?:^|[;,\s])wait=(\d{1,6})(?:$|[;,\s])/.exec(prefer);
  if (!match) return 0;
  return Math.max(0, Math.min(Number(match[1]), MAX_HOLD_SECONDS) - 1);
}

/** Holds the request until the store's revision moves, `wait` seconds pass, or OPA hangs up. */
async function heldUntilChanged(
  ctx: Context,
  snapshots: PolicySnapshots,
  current: Awaited<ReturnType<PolicySnapshots['current']>>,
  wait: number,
) {
  const deadline = Date.now() + wait * 1000;
  while (Date.now() < deadline && !ctx.req.socket.destroyed) {
    await snapshots.nextChange(RECHECK_MS);
    const latest = await snapshots.current();
    if (latest.revision !== current.revision) return latest;
  }
  return current;
}

function reply(
  ctx: Context,
  status: number,
  error: string,
  description: string,
  headers: Record<string, string>,
): void {
  ctx.set(headers);
  ctx.status = status;
  ctx.body = { error, error_description: description };
}

function matchesIfNoneMatch(header: string, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, '');
    return tag === '*' || tag === etag;
  });
}
