import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Two listeners, one application: with ADMIN_PORT set, the admin surface (the Admin API, the
 * console, /metrics) is served on a listener of its own and on no other, so that the public
 * port can face the internet while the admin port faces operators only. The route table says
 * which route is served where (src/dispatch.ts); a route on the other listener is a 404, exactly
 * as a path that names nothing (the public port does not reveal that an admin surface exists).
 */

/** Requests that arrived on the admin listener (marked by the server before Koa sees them). */
const adminRequests = new WeakSet<IncomingMessage>();

export function markAdminListener(request: IncomingMessage): void {
  adminRequests.add(request);
}

export function viaAdminListener(request: IncomingMessage): boolean {
  return adminRequests.has(request);
}

/** How a listener speaks: HTTPS when it terminates TLS itself (TLS_CERT_FILE, src/http/tls.ts). */
export type Scheme = 'http' | 'https';

/** A bound address as a URL origin: `http://[::]:9000`, `https://127.0.0.1:9001`. */
export function boundOrigin(address: AddressInfo, scheme: Scheme = 'http'): string {
  return `${scheme}://${hostPart(address.address, address.family)}:${address.port}`;
}

/**
 * Where a process on this host reaches a listener (the managed OPA, the tests): its own address,
 * or loopback for a listener on every interface (`::` on Linux also takes IPv4).
 */
export function reachableOrigin(address: AddressInfo, scheme: Scheme = 'http'): string {
  const unspecified = address.address === '0.0.0.0' || address.address === '::';
  return unspecified
    ? `${scheme}://127.0.0.1:${address.port}`
    : `${scheme}://${hostPart(address.address, address.family)}:${address.port}`;
}

function hostPart(host: string, family: string): string {
  return family === 'IPv6' || family === '6' ? `[${host}]` : host;
}

/** `(every interface)` after an unspecified address, for the start-up line. */
export function describeBound(address: AddressInfo, scheme: Scheme = 'http'): string {
  const unspecified = address.address === '0.0.0.0' || address.address === '::';
  return `${boundOrigin(address, scheme)}${unspecified ? ' (every interface)' : ''}`;
}
