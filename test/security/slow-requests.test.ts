import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';

/** What the server wrote on a connection before it closed it. */
function untilClosed(socket: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => socket.once('close', () => resolve(Buffer.concat(chunks).toString('latin1'))));
}

/** Sends `head` at once, then one byte of `trickle` every 100 ms for as long as the connection is open. */
function slowSender(server: TestServer, head: string, trickle: string): { socket: Socket; closed: Promise<string> } {
  const { port } = new URL(server.url);
  const socket = connect(Number(port), '127.0.0.1');
  const closed = untilClosed(socket);
  socket.on('error', () => undefined);
  socket.once('connect', () => {
    socket.write(head);
    let at = 0;
    const timer = setInterval(() => {
      if (socket.destroyed || at >= trickle.length) return clearInterval(timer);
      socket.write(trickle[at++]!);
    }, 100);
    socket.once('close', () => clearInterval(timer));
  });
  return { socket, closed };
}

/**
 * Issue 27 item 12: a client that sends its headers or body a byte at a time held its connection
 * (and the request's body reader) for Node's default 300 s. With HTTP_REQUEST_TIMEOUT_MS and
 * HTTP_HEADERS_TIMEOUT_MS it is answered 408 and the connection is closed once they pass.
 */
describe('Slow request bodies and headers', function () {
  this.timeout(60_000);
  let server: TestServer;

  before(async function () {
    // Its own server: short HTTP timeouts that would cut other files' requests.
    server = await readyServer({ HTTP_REQUEST_TIMEOUT_MS: '1000', HTTP_HEADERS_TIMEOUT_MS: '1000' });
  });
  after(async function () {
    await server?.close();
  });

  it('answers 408 and closes the connection of a body that trickles in (POST /token)', async function () {
    const body = `grant_type=client_credentials&scope=${'x'.repeat(5000)}`;
    const head = `POST /token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\nX-Request-ID: trickled-body\r\n\r\n`;
    const { closed } = slowSender(server, head, body);
    const written = await closed;
    expect(written).to.match(/^HTTP\/1\.1 408 /);
  });

  it('does the same for a JSON body of the Admin API', async function () {
    const body = JSON.stringify({ subjectId: 'slow', padding: 'p'.repeat(5000) });
    const head = `POST /admin/api/subjects HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Admin-API-Key: ${ADMIN_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const written = await slowSender(server, head, body).closed;
    expect(written).to.match(/^HTTP\/1\.1 408 /);
    expect((await server.admin('GET', '/subjects/slow')).status, 'nothing half-read was stored').to.equal(404);
  });

  it('closes the connection of a body nobody reads (a media type oidc-provider refuses unread) once the timeout passes', async function () {
    const body = JSON.stringify({ grant_type: 'client_credentials', padding: 'p'.repeat(5000) });
    const head = `POST /token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const written = await slowSender(server, head, body).closed;
    expect(written).to.match(/^HTTP\/1\.1 4\d\d /);
  });

  it('answers 408 and closes the connection of headers that never end', async function () {
    const written = await slowSender(
      server,
      'GET /userinfo HTTP/1.1\r\nHost: 127.0.0.1\r\n',
      `X-Slow: ${'s'.repeat(5000)}`,
    ).closed;
    expect(written).to.match(/^HTTP\/1\.1 408 /);
    // Refused by Node's parser before any of Arbiter's code ran, and still answered as every refusal is.
    expect(written).to.match(/\r\ncontent-type: application\/json\r\n/i);
    expect(JSON.parse(written.slice(written.indexOf('\r\n\r\n') + 4))).to.include({ error: 'invalid_request' });
  });

  it('records the trickled request in the audit log with the status the caller got', async function () {
    const { body } = await server.admin('GET', '/audit-logs?endpoint=%2Ftoken&size=100');
    const entry = body.content.find((candidate: { requestId: string }) => candidate.requestId === 'trickled-body');
    expect(entry, 'its audit entry').to.not.equal(undefined);
    expect(entry.requestSummary.status).to.equal(408);
  });

  it('refuses a headers timeout longer than the request timeout at start-up, naming the variable', function () {
    expect(() => loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '5000', HTTP_HEADERS_TIMEOUT_MS: '6000' })).to.throw(
      ConfigError,
      'HTTP_HEADERS_TIMEOUT_MS',
    );
    expect(loadConfig({}).httpRequestTimeoutMs, 'the default').to.equal(30_000);
  });
});
