import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Middleware } from 'koa';
import type { Logger } from '../log/index.js';
import { etagOf } from './bundle.js';
import type { PolicySnapshots } from './snapshots.js';

export const BUNDLE_PATH = '/policy/bundle.tar.gz';

/**
 * GET /policy/bundle.tar.gz for OPA's bundle plugin: bearer-protected, with an ETag so that
 * OPA's polls of an unchanged policy set cost a 304 and no download.
 */
export function bundleMiddleware(snapshots: PolicySnapshots, bundleToken: string, log: Logger): Middleware {
  return async (ctx, next) => {
    if (ctx.path !== BUNDLE_PATH) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return reply(ctx, 405, 'invalid_request', 'use GET', { Allow: 'GET, HEAD' });
    if (!bearerMatches(ctx.get('authorization'), bundleToken)) {
      return reply(ctx, 401, 'invalid_token', 'the policy bundle requires Authorization: Bearer <POLICY_BUNDLE_TOKEN>', { 'WWW-Authenticate': 'Bearer' });
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
  const snapshot = await snapshots.current();
  const etag = etagOf(snapshot.revision);
  ctx.set('ETag', etag);
  ctx.set('Cache-Control', 'no-cache');
  if (matchesIfNoneMatch(ctx.get('if-none-match'), etag)) {
    ctx.status = 304;
    return;
  }
  const body = await snapshots.bundle(snapshot);
  ctx.status = 200;
  ctx.type = 'application/gzip';
  ctx.body = body;
}

function reply(ctx: Context, status: number, error: string, description: string, headers: Record<string, string>): void {
  ctx.set(headers);
  ctx.status = status;
  ctx.body = { error, error_description: description };
}

/** Compares digests so that neither the token nor its length leaks through timing. */
function bearerMatches(header: string, expected: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) return false;
  const sha = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(sha(match[1]), sha(expected));
}

function matchesIfNoneMatch(header: string, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, '');
    return tag === '*' || tag === etag;
  });
}
