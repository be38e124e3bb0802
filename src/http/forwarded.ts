import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Context } from 'koa';
import ipaddr from 'ipaddr.js';

const FORWARDED_HEADERS = [
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-real-ip',
];

/**
 * Requests whose peer is a trusted proxy. What that proxy says of the client (its certificate in
 * MTLS_CERTIFICATE_HEADER) is believed, never the proxy's own TLS certificate (src/oauth/mtls).
 */
const throughTrustedProxy = new WeakSet<IncomingMessage>();

/** Whether the request's peer is one of TRUSTED_PROXIES (as trustedCaller found it). */
export function cameThroughTrustedProxy(request: IncomingMessage): boolean {
  return throughTrustedProxy.has(request);
}

/**
 * Forwarded headers are believed only from configured proxies: from any other peer they are
 * removed before anything reads them, so that a caller cannot choose the address written to the
 * audit log or counted by the authentication-failure limit, nor the scheme or host oidc-provider
 * sees. With a trusted proxy, Koa (`proxy`, `maxIpsCount: 1`) takes the address that proxy appended.
 * IPv4-mapped IPv6 addresses are written as plain IPv4.
 *
 * With an https issuer (`httpsIssuer`), a request that no trusted proxy said otherwise of is taken
 * as https: the browser spoke TLS to whatever terminates it before this listener, so the cookies
 * Arbiter and oidc-provider set are Secure and the URLs they build are https, TRUSTED_PROXIES or not.
 */
export function trustedCaller(trustedProxies: string[], proxyHeaders: readonly string[] = [], httpsIssuer = false) {
  const trusted = trustedProxies.map(parseRange);
  // Other headers only a trusted proxy may set (MTLS_CERTIFICATE_HEADER: the client certificate it saw).
  const removed = [...FORWARDED_HEADERS, ...proxyHeaders.map((header) => header.toLowerCase())];
  // A connection's peer does not change: whether it is a trusted proxy, and its address's one spelling, are worked out once per socket.
  const peers = new WeakMap<Socket, Peer>();
  return (ctx: Context): void => {
    const socket = ctx.req.socket;
    let peer = peers.get(socket);
    if (!peer) {
      peer = {
        trusted: isTrusted(socket.remoteAddress, trusted),
        address: canonicalAddress(socket.remoteAddress ?? ''),
      };
      if (socket.remoteAddress) peers.set(socket, peer);
    }
    if (peer.trusted) {
      throughTrustedProxy.add(ctx.req);
      ctx.request.ip = canonicalAddress(ctx.ip);
    } else {
      for (const header of removed) delete ctx.req.headers[header];
      // Without forwarded headers, Koa's ctx.ip is the peer's address.
      ctx.request.ip = peer.address;
    }
    // Koa (proxy: true) and oidc-provider read the scheme there.
    if (httpsIssuer && ctx.req.headers['x-forwarded-proto'] === undefined)
      ctx.req.headers['x-forwarded-proto'] = 'https';
  };
}

interface Peer {
  trusted: boolean;
  address: string;
}

/**
 * What a per-address limit counts (the failure limit, the device user-code guesses): an IPv4
 * address as it is, an IPv6 one by its /64, the prefix a single subscriber is given and may fill
 * with addresses at will (RFC 6177).
 */
export function limitedAddress(ip: string): string {
  if (!ipaddr.IPv6.isValid(ip) || ipaddr.IPv4.isValid(ip)) return ip;
  const address = ipaddr.process(ip);
  if (address.kind() !== 'ipv6') return address.toString();
  const parts = (address as ipaddr.IPv6).parts.slice(0, 4);
  return `${parts.map((part) => part.toString(16)).join(':')}::/64`;
}

/** One spelling per address for the audit log and the failure limit: ::ffff:127.0.0.1 is 127.0.0.1. */
function canonicalAddress(address: string): string {
  return ipaddr.isValid(address) ? ipaddr.process(address).toString() : address;
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

function parseRange(entry: string): Range {
  if (entry.includes('/')) return ipaddr.parseCIDR(entry);
  const address = ipaddr.parse(entry);
  return [address, address.kind() === 'ipv4' ? 32 : 128];
}

function isTrusted(remote: string | undefined, trusted: Range[]): boolean {
  if (!remote || trusted.length === 0 || !ipaddr.isValid(remote)) return false;
  const address = ipaddr.process(remote);
  return trusted.some(([range, bits]) => address.kind() === range.kind() && address.match(range, bits));
}
