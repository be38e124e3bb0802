import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../log/index.js';

/** What Node's parser refused, by its error code: the status Node itself gives it, and what to tell the caller. */
const REFUSALS: Record<string, { status: number; description: string }> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    description: `the request's header section exceeds ${maxHeaderSize} bytes (Node's --max-http-header-size)`,
  },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { status: 413, description: "the request's chunk extensions are too large" },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    description: 'the request did not arrive within HTTP_HEADERS_TIMEOUT_MS (its headers) or HTTP_REQUEST_TIMEOUT_MS',
  },
};
const MALFORMED = { status: 400, description: 'the request is not well-formed HTTP/1.1' };

/**
 * Answers what Node's HTTP parser refuses before any of Arbiter's code runs as Arbiter answers
 * every refusal: a JSON body with an OAuth error code and a description, no-store, and the
 * connection closed. Node's own answers to them (431 for a header section over its limit, 400 for
 * a request that is not HTTP/1.1, 408 past the arrival timeouts) have no body at all. As Node
 * does, nothing is written once the response of a request on that connection has begun.
 */
export function answerParserRefusals(server: Server, log: Logger): void {
  const answering = new WeakMap<Duplex, ServerResponse>();
  server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
    answering.set(request.socket, response);
    response.once('finish', () => {
      if (answering.get(request.socket) === response) answering.delete(request.socket);
    });
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const refusal = REFUSALS[error.code ?? ''] ?? MALFORMED;
    const begun = answering.get(socket)?.headersSent === true;
    if (socket.writable && !begun) {
      socket.write(refusalText(refusal.status, refusal.description));
      log.info({ status: refusal.status, reason: error.code ?? error.message }, 'request refused by the HTTP parser');
    }
    socket.destroy(error);
  });
}

function refusalText(status: number, description: string): string {
  const body = JSON.stringify({ error: 'invalid_request', error_description: description });
  return [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
    'Content-Type: application/json',
    'Cache-Control: no-store',
    'X-Content-Type-Options: nosniff',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}
