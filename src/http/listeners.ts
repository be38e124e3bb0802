import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context, Next } from 'koa';
import { isAdminSurfacePath } from './admin-path.js';
import { notFound } from './errors.js';

/**
 * Two listeners, one application: with ADMIN_PORT set, the admin surface (the Admin API, the
 * console, /metrics) is served on a listener of its own and on no other, so that the public
 * port can face the internet while the admin port faces operators only.
 */

/** Requests that arrived on the admin listener (marked by the server before Koa sees them). */
const viaAdminListener = new WeakSet<IncomingMessage>();

export function markAdminListener(request: IncomingMessage): void {
  viaAdminListener.add(request);
}

export interface ListenerSplit {
  /** Paths besides the admin surface that the admin listener serves too (probes, OPA's bundle): exact spellings. */
  shared: readonly string[];
  /** The admin surface's own exact paths outside /admin (GET /metrics). */
  adminOnly: readonly string[];
}

/**
 * Mounted only when the admin surface has a listener of its own: on the public listener every
 * spelling of the console's and the Admin API's paths and of the `adminOnly` paths is a 404, exactly as a path that names nothing
 * (the public port does not reveal that an admin surface exists); on the admin listener
 * everything else but `shared` is a 404.
 */
export function splitListeners({ shared, adminOnly }: ListenerSplit) {
  const isAdminSurface = (path: string) =>
    isAdminSurfacePath(path) || adminOnly.some((adminPath) => isSpellingOf(path, adminPath));
  return async (ctx: Context, next: Next): Promise<void> => {
    const served = viaAdminListener.has(ctx.req)
      ? isAdminSurface(ctx.path) || shared.includes(ctx.path)
      : !isAdminSurface(ctx.path);
    if (!served) {
      ctx.status = 404;
      const refusal = notFound('no such endpoint');
      ctx.body = { error: refusal.code, error_description: refusal.message };
      return;
    }
    await next();
  };
}

/** A path that a case-insensitive, slash-tolerant reading would take for `path` (/Metrics, /metrics/). */
function isSpellingOf(candidate: string, path: string): boolean {
  return candidate.toLowerCase().replace(/\/+$/, '') === path;
}

/** A bound address as a URL origin: `http://[::]:9000`, `http://127.0.0.1:9001`. */
export function boundOrigin(address: AddressInfo): string {
  return `http://${hostPart(address.address, address.family)}:${address.port}`;
}

/**
 * Where a process on this host reaches a listener (the managed OPA, the tests): its own address,
 * or loopback for a listener on every interface (`::` on Linux also takes IPv4).
 */
export function reachableOrigin(address: AddressInfo): string {
  const unspecified = address.address === '0.0.0.0' || address.address === '::';
  return unspecified
    ? `http://127.0.0.1:${address.port}`
    : `http://${hostPart(address.address, address.family)}:${address.port}`;
}

function hostPart(host: string, family: string): string {
  return family === 'IPv6' || family === '6' ? `[${host}]` : host;
}

/** `(every interface)` after an unspecified address, for the start-up line. */
export function describeBound(address: AddressInfo): string {
  const unspecified = address.address === '0.0.0.0' || address.address === '::';
  return `${boundOrigin(address)}${unspecified ? ' (every interface)' : ''}`;
}
