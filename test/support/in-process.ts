import { request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { duplexPair, type Duplex } from 'node:stream';
import { adminVia, ADMIN_KEY, type RequestOptions, type TestServer } from './server.js';

/**
 * The same server, asked without a socket: each request goes to the server's own HTTP handler
 * (its `http.Server`, so Node's HTTP parser, the request limits, Koa and every middleware run
 * as for a real client) through an in-memory pipe instead of a loopback TCP connection and
 * fetch. For tests where the socket is not the subject; what reaches the server by its URL
 * (openid-client's discovery, a browser, the managed OPA's bundle polls) still goes over HTTP.
 * The pipe's end looks like a loopback client (remoteAddress 127.0.0.1), as a fetch would.
 * TEST_OVER_HTTP=1 sends them over HTTP again (to compare, or to rule the pipe out).
 */
export function inProcess(server: TestServer): TestServer {
  if (process.env.TEST_OVER_HTTP === '1') return server;
  const publicServer = server.server;
  const request: TestServer['request'] = (path, init = {}) => {
    if (init.listener === 'admin') return server.request(path, init);
    return injected(publicServer, server.url, path, init);
  };
  return { ...server, request, admin: adminVia(request, server.adminUrl ? 'admin' : 'public') };
}

/** One request through a fresh in-memory connection to `target` (closed with the answer). */
async function injected(target: Server, origin: string, path: string, init: RequestOptions): Promise<Response> {
  const headers = new Headers(init.headers);
  if (init.key !== undefined) headers.set('X-Admin-API-Key', init.key);
  else if (init.admin && !headers.has('X-Admin-API-Key')) headers.set('X-Admin-API-Key', ADMIN_KEY);
  if (init.tenant) headers.set('X-Tenant-Id', init.tenant);
  let body = init.body as string | Uint8Array | URLSearchParams | null | undefined;
  if (init.json !== undefined) {
    headers.set('Content-Type', 'application/json');
    body = JSON.stringify(init.json);
  }
  if (body instanceof URLSearchParams) {
    if (!headers.has('Content-Type')) headers.set('Content-Type', 'application/x-www-form-urlencoded;charset=UTF-8');
    body = body.toString();
  }
  if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array))
    throw new Error('inProcess requests take a string, bytes, URLSearchParams or json body');
  const url = new URL(path, origin);
  if (!headers.has('Host')) headers.set('Host', url.host);
  const [client, serverSide] = duplexPair();
  Object.defineProperties(serverSide, {
    remoteAddress: { value: '127.0.0.1' },
    remoteFamily: { value: 'IPv4' },
    remotePort: { value: 0 },
    localAddress: { value: '127.0.0.1' },
    localPort: { value: Number(url.port) },
  });
  target.emit('connection', serverSide);
  try {
    return await exchange(client, url, init.method ?? 'GET', headers, body ?? undefined);
  } finally {
    client.destroy();
    serverSide.destroy();
  }
}

function exchange(
  socket: Duplex,
  url: URL,
  method: string,
  headers: Headers,
  body: string | Uint8Array | undefined,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      {
        method,
        path: `${url.pathname}${url.search}`,
        headers: Object.fromEntries(headers),
        createConnection: () => socket as never,
      },
      (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('error', reject);
        incoming.on('end', () => {
          const status = incoming.statusCode ?? 500;
          // A Response may not carry a body with these statuses.
          const empty = status === 204 || status === 304 || method === 'HEAD';
          resolve(
            new Response(empty ? null : Buffer.concat(chunks), {
              status,
              statusText: incoming.statusMessage,
              headers: responseHeaders(incoming.headers),
            }),
          );
        });
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

function responseHeaders(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    for (const each of Array.isArray(value) ? value : [value]) headers.append(name, each);
  }
  return headers;
}
