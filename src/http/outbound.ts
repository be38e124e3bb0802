import { AsyncLocalStorage } from 'node:async_hooks';
import { once } from 'node:events';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import got, { type Agents } from 'got';
import ipaddr from 'ipaddr.js';
import { LookupLimiter, type LookupLane } from './dns-lookups.js';

/**
 * The one way Arbiter fetches a URL that an operator or a client supplied (upstream IdP
 * discovery and endpoints, JWKS URIs, metadata documents). Such a URL must not become a
 * way into Arbiter's own network (SSRF): every destination address is checked after DNS
 * resolution and on every redirect, before a connection is made.
 */
export interface OutboundOptions {
  /** Development and tests: loopback destinations, and plain http:// to loopback only. */
  allowInsecureLoopback: boolean;
  /** Per request, from connecting to the last byte (each redirect hop is a request). */
  timeoutMs: number;
  /** Of the decoded body; larger responses are abandoned while they stream in. */
  maxResponseBytes: number;
  /** Whose word the URLs are on: a caller's names get a share of the DNS lookups only (dns-lookups.ts). Operator's by default. */
  namesFrom?: LookupLane;
}

/**
 * The trace context of the request being answered, as headers (`traceparent`, `tracestate`) for
 * the calls it makes: set per request by src/tracing when tracing is on, read at each hop.
 */
export const outboundTraceHeaders = new AsyncLocalStorage<() => Record<string, string>>();

export interface Outbound {
  /** WHATWG fetch semantics (also openid-client's `customFetch`), with the guard and limits. */
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** GET a JSON document (JWKS, metadata); anything but a 2xx JSON answer is an OutboundResponseError. */
  getJson: (url: string | URL) => Promise<unknown>;
}

/**
 * The policy refused the destination; no connection was made. A TypeError, as fetch's own
 * network errors are, so that fetch callers (openid-client) treat it as "unreachable".
 */
export class OutboundRefusedError extends TypeError {
  readonly code = 'OUTBOUND_REFUSED';
  constructor(readonly reason: string) {
    super(`outbound request refused: ${reason}`);
    this.name = 'OutboundRefusedError';
  }
}

/** The destination answered beyond a limit (size, redirects). */
export class OutboundLimitError extends TypeError {
  readonly code = 'OUTBOUND_LIMIT';
  constructor(message: string) {
    super(message);
    this.name = 'OutboundLimitError';
  }
}

/** getJson: the document could not be used (status, content); never carries the body. */
export class OutboundResponseError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'OutboundResponseError';
  }
}

/** Enough for an IdP or CDN moving a document once or twice; never a chain. */
const MAX_REDIRECTS = 3;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Statuses whose Response must have a null body. */
const NULL_BODY_STATUSES = new Set([204, 205, 304]);
/** The body is handed over decoded and whole, so these no longer describe it. */
const DROPPED_RESPONSE_HEADERS = new Set(['content-encoding', 'content-length', 'transfer-encoding']);
/** Cloud metadata and host-agent services; some are public unicast (Azure's WireServer), so ranges alone miss them. */
const METADATA_ADDRESSES = [
  '169.254.169.254/32',
  '169.254.170.2/32',
  '168.63.129.16/32',
  '100.100.100.200/32',
  '192.0.0.192/32',
  'fd00:ec2::254/128',
].map((cidr) => ipaddr.parseCIDR(cidr));
/** Only the global unicast block of IPv6 is public; ipaddr.js calls some other unassigned space "unicast". */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/** The outbound options configuration sets (OUTBOUND_* variables). */
export function outboundOptionsOf(config: {
  outboundAllowInsecureLoopback: boolean;
  outboundTimeoutMs: number;
  outboundMaxResponseBytes: number;
}): OutboundOptions {
  return {
    allowInsecureLoopback: config.outboundAllowInsecureLoopback,
    timeoutMs: config.outboundTimeoutMs,
    maxResponseBytes: config.outboundMaxResponseBytes,
  };
}

/** The outbound clients made so far, by their options: see `sharedOutbound`. */
const sharedOutbounds = new Map<string, Outbound>();

/**
 * The outbound client for `options`, made once per process and shared by its callers: what each
 * tenant's provider builds (its jwks_uri fetches, its client metadata documents) does not depend
 * on the tenant, and a client holds no connection between requests (no keep-alive), so a thousand
 * tenants need not hold a thousand pairs of agents.
 */
export function sharedOutbound(options: OutboundOptions): Outbound {
  const key = JSON.stringify([
    options.allowInsecureLoopback,
    options.timeoutMs,
    options.maxResponseBytes,
    options.namesFrom ?? 'operator',
  ]);
  let outbound = sharedOutbounds.get(key);
  if (!outbound) sharedOutbounds.set(key, (outbound = createOutbound(options)));
  return outbound;
}

export function createOutbound(options: OutboundOptions): Outbound {
  // Own agents without keep-alive: every request opens a connection through the guarded
  // lookup, and no socket opened by unguarded code is ever reused.
  const agent: Agents = { http: new HttpAgent({ keepAlive: false }), https: new HttpsAgent({ keepAlive: false }) };
  // async: a refused destination is a rejected promise, as fetch's own network errors are.
  const fetch = async (input: string | URL | Request, init?: RequestInit) =>
    guardedFetch(requestOf(input, init, options), options, agent);
  return { fetch, getJson: (url) => getJson(fetch, url) };
}

/**
 * A URL as a log line or an operator's screen may show it: its origin and path. User information,
 * query and fragment may carry a credential (`?token=…`) and are left out; '' when not a URL.
 */
export function shownUrl(url: string): string {
  const parsed = URL.parse(url);
  return parsed ? `${parsed.origin}${parsed.pathname}` : '';
}

/**
 * fetch's Request, from a destination checked first: fetch's own refusal of a URL (one with
 * credentials, for one) quotes it whole, and the message is logged and kept as a delivery's error.
 */
function requestOf(input: string | URL | Request, init: RequestInit | undefined, options: OutboundOptions): Request {
  if (!(input instanceof Request)) assertFetchableUrl(input, options.allowInsecureLoopback);
  try {
    return new Request(input, init);
  } catch (error) {
    throw new OutboundRefusedError(`the request cannot be made (${error instanceof Error ? error.name : 'error'})`);
  }
}

/**
 * Scheme and IP-literal check of a URL, without DNS: https only, http only to loopback when
 * insecure loopback is allowed; literal addresses as `addressRefusal` says. Returns the
 * parsed URL (WHATWG parsing has already normalized odd IPv4 spellings such as 0x7f.1).
 */
export function assertFetchableUrl(input: string | URL, allowInsecureLoopback: boolean): URL {
  const url = parseUrl(input);
  // fetch refuses them too; a credential belongs in a header, never in a URL that is logged.
  if (url.username || url.password)
    throw new OutboundRefusedError('a URL with credentials (user:password@) is not fetched');
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowInsecureLoopback)) {
    throw new OutboundRefusedError(
      `the ${url.protocol} scheme is not allowed (${allowInsecureLoopback ? 'https, or http to loopback' : 'https only'})`,
    );
  }
  const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
  // Node connects to an IP literal without calling the lookup, so literals are checked here.
  if (isIP(literal)) assertAddress(literal, url, allowInsecureLoopback);
  return url;
}

function parseUrl(input: string | URL): URL {
  try {
    return new URL(input);
  } catch {
    throw new OutboundRefusedError('not an absolute URL');
  }
}

function assertAddress(address: string, url: URL, allowInsecureLoopback: boolean): void {
  const refusal = addressRefusal(ipaddr.process(address), url.protocol, allowInsecureLoopback);
  if (refusal) throw new OutboundRefusedError(`${url.protocol}//${url.host}: ${address} is ${refusal}`);
}

/** Why a destination address is refused, or undefined. `process` has unwrapped IPv4-mapped IPv6. */
function addressRefusal(
  ip: ipaddr.IPv4 | ipaddr.IPv6,
  protocol: string,
  allowInsecureLoopback: boolean,
): string | undefined {
  if (ip.range() === 'loopback')
    return allowInsecureLoopback
      ? undefined
      : 'a loopback address (allowed only with OUTBOUND_ALLOW_INSECURE_LOOPBACK=true)';
  if (METADATA_ADDRESSES.some(([base, bits]) => ip.kind() === base.kind() && ip.match(base, bits)))
    return 'a cloud metadata address';
  if (ip.range() !== 'unicast') return `in the ${ip.range()} range`;
  if (ip instanceof ipaddr.IPv6 && !ip.match(GLOBAL_UNICAST_V6)) return 'not a global unicast address';
  if (protocol === 'http:') return 'not loopback, and plain http is allowed only to loopback';
  return undefined;
}

/** Every outbound lookup of this process, a few at a time (dns-lookups.ts). */
const lookups = new LookupLimiter();

/**
 * A DNS lookup that refuses the connection when any resolved address is refused: a name
 * that resolves partly into private space is not trusted with the rest (and DNS rebinding
 * cannot swap the address after the check, since the checked address is the one connected to).
 * It waits at most the request's time for its turn (LookupLimiter).
 */
function guardedLookup(
  url: URL,
  { allowInsecureLoopback, timeoutMs, namesFrom = 'operator' }: OutboundOptions,
): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    const answered = (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => {
      if (error) return callback(error, '');
      try {
        if (!addresses.length) throw new OutboundRefusedError(`${url.host} resolves to no address`);
        for (const { address } of addresses) assertAddress(address, url, allowInsecureLoopback);
      } catch (refusal) {
        return callback(refusal as Error, '');
      }
      if (lookupOptions.all) return callback(null, addresses);
      const { address, family } = addresses[0]!; // at least one: checked above
      callback(null, address, family);
    };
    lookups.resolve(hostname, { ...lookupOptions, all: true }, timeoutMs, namesFrom).then(
      (addresses) => answered(null, addresses),
      (error: NodeJS.ErrnoException) => answered(error, []),
    );
  };
}

interface Hop {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: Buffer;
}

/** fetch's redirect modes over single guarded hops; each hop re-checks its destination. */
async function guardedFetch(request: Request, options: OutboundOptions, agent: Agents): Promise<Response> {
  let hop: Hop = { url: new URL(request.url), method: request.method, headers: Object.fromEntries(request.headers) };
  if (request.body) hop.body = Buffer.from(await request.arrayBuffer());
  for (let redirects = 0; ; redirects += 1) {
    const response = await send(hop, request.signal, options, agent);
    const location = REDIRECT_STATUSES.has(response.status) ? response.headers.get('location') : null;
    if (location === null || request.redirect === 'manual') return withUrl(response, hop.url, redirects > 0);
    if (request.redirect === 'error') throw new TypeError(`${hop.url.origin} answered with a redirect`);
    if (redirects >= MAX_REDIRECTS)
      throw new OutboundLimitError(`more than ${MAX_REDIRECTS} redirects from ${hop.url.origin}`);
    hop = redirected(hop, response.status, new URL(location, hop.url));
  }
}

/** The next hop as fetch builds it: 303 (and 301/302 after POST) become a GET; credentials stay with their origin. */
function redirected(hop: Hop, status: number, url: URL): Hop {
  const headers = { ...hop.headers };
  if (url.origin !== hop.url.origin)
    for (const name of ['authorization', 'cookie', 'proxy-authorization']) delete headers[name];
  const toGet =
    (status === 303 && hop.method !== 'HEAD') || ((status === 301 || status === 302) && hop.method === 'POST');
  if (!toGet) return { ...hop, url, headers };
  for (const name of ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location'])
    delete headers[name];
  return { url, method: 'GET', headers };
}

/** One request, no redirects followed, checked before connecting and bounded in time and size. */
async function send(hop: Hop, signal: AbortSignal, options: OutboundOptions, agent: Agents): Promise<Response> {
  const url = assertFetchableUrl(hop.url, options.allowInsecureLoopback);
  signal.throwIfAborted();
  // The caller's signal is not given to got: got only lets go of it when its stream is
  // destroyed, and a late abort (openid-client's timeout signal) would then raise an error
  // nobody listens to. Here the listener lives exactly as long as the request.
  const stream = got.stream(url, {
    method: hop.method as 'GET',
    headers: { 'user-agent': 'Arbiter', ...outboundTraceHeaders.getStore()?.(), ...hop.headers },
    ...(hop.body ? { body: hop.body } : {}),
    agent,
    dnsLookup: guardedLookup(url, options),
    followRedirect: false,
    throwHttpErrors: false,
    retry: { limit: 0 },
    timeout: { request: options.timeoutMs },
    enableUnixSockets: false,
  });
  const abort = () => stream.destroy(signal.reason);
  signal.addEventListener('abort', abort, { once: true });
  try {
    const [head] = (await once(stream, 'response')) as [
      { statusCode: number; statusMessage?: string; rawHeaders: string[] },
    ];
    const body = await readCapped(stream, head.rawHeaders, url, options.maxResponseBytes);
    return toResponse(head, NULL_BODY_STATUSES.has(head.statusCode) || hop.method === 'HEAD' ? null : body);
  } catch (error) {
    throw fetchError(error, url, signal);
  } finally {
    signal.removeEventListener('abort', abort);
    // Also ends got's timers and listeners, which a fully read stream would otherwise keep.
    stream.destroy();
  }
}

/** Reads the (decoded) body, refusing to keep more than `limit` bytes: a declared length is refused up front. */
async function readCapped(stream: Readable, rawHeaders: string[], url: URL, limit: number): Promise<Buffer> {
  const tooLarge = () => new OutboundLimitError(`the response from ${url.origin} exceeds ${limit} bytes`);
  const declared = rawHeaders.findIndex((name, index) => index % 2 === 0 && name.toLowerCase() === 'content-length');
  if (declared >= 0 && Number(rawHeaders[declared + 1]) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function toResponse(
  head: { statusCode: number; statusMessage?: string; rawHeaders: string[] },
  body: Buffer | null,
): Response {
  const headers = new Headers();
  // Node's raw headers alternate name and value.
  for (let index = 0; index < head.rawHeaders.length; index += 2) {
    const name = head.rawHeaders[index]!;
    if (!DROPPED_RESPONSE_HEADERS.has(name.toLowerCase())) headers.append(name, head.rawHeaders[index + 1]!);
  }
  if (head.statusCode < 200 || head.statusCode > 599) throw new TypeError(`unexpected HTTP status ${head.statusCode}`);
  return new Response(body, { status: head.statusCode, statusText: head.statusMessage ?? '', headers });
}

/** A constructed Response has no url; fetch callers may read it. */
function withUrl(response: Response, url: URL, redirected: boolean): Response {
  Object.defineProperty(response, 'url', { value: url.href });
  Object.defineProperty(response, 'redirected', { value: redirected });
  return response;
}

/**
 * fetch's error contract: the caller's abort reason, our refusals and limits as they are,
 * anything else a TypeError naming only the origin (got's errors may carry the request).
 */
function fetchError(error: unknown, url: URL, signal: AbortSignal): unknown {
  if (signal.aborted) return signal.reason;
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof OutboundRefusedError || cause instanceof OutboundLimitError) return cause;
  }
  const code = (error as { code?: unknown }).code;
  return new TypeError(`outbound request to ${url.origin} failed${typeof code === 'string' ? ` (${code})` : ''}`, {
    cause: error,
  });
}

async function getJson(fetch: Outbound['fetch'], input: string | URL): Promise<unknown> {
  const url = parseUrl(input);
  const response = await fetch(url, { headers: { accept: 'application/json' } });
  if (!response.ok) throw new OutboundResponseError(`${url.origin} answered ${response.status}`, response.status);
  try {
    return JSON.parse(await response.text());
  } catch {
    throw new OutboundResponseError(`the document at ${url.origin} is not JSON`, response.status);
  }
}
