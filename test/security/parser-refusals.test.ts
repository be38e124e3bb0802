import { connect } from 'node:net';
import { expect } from 'chai';
import { withServer, type TestServer } from '../support/server.js';

/**
 * Writes each of `requests` on one connection of its own, the next once an answer to the previous
 * one has arrived, and resolves with all the server wrote back once it closed the connection.
 */
function exchange(server: TestServer, ...requests: string[]): Promise<string> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    let written = '';
    let next = 0;
    const sendNext = () => socket.write(requests[next++]!);
    const socket = connect(Number(port), '127.0.0.1', sendNext);
    socket.on('data', (chunk: Buffer) => {
      written += chunk.toString('utf8');
      if (next < requests.length && written.includes('\r\n\r\n')) sendNext();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(written));
  });
}

/** The status, headers (lower-cased names) and JSON body of the last response in `written`. */
function lastResponse(written: string): { status: number; headers: Map<string, string>; body: any } {
  const start = written.lastIndexOf('HTTP/1.1 ');
  const [head = '', body = ''] = written.slice(start).split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = new Map(
    lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) };
}

/**
 * What Node's HTTP parser refuses before any of Arbiter's code runs (src/http/parser-refusals.ts):
 * answered with Node's status, but as every refusal of Arbiter is, a JSON body with an OAuth
 * error code, not an empty one.
 */
describe("Requests Node's HTTP parser refuses are answered in JSON", function () {
  let server: TestServer;

  before(async function () {
    server = await withServer();
  });

  it('431 for a header section over the limit, with invalid_request, no-store and the connection closed', async function () {
    const written = await exchange(
      server,
      `GET /.well-known/openid-configuration HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`,
    );
    const answer = lastResponse(written);
    expect(answer.status, written.slice(0, 200)).to.equal(431);
    expect(answer.headers.get('content-type')).to.equal('application/json');
    expect(answer.headers.get('cache-control')).to.equal('no-store');
    expect(answer.headers.get('connection')).to.equal('close');
    expect(answer.body.error).to.equal('invalid_request');
    expect(answer.body.error_description).to.match(/header section exceeds \d+ bytes/);
  });

  it('400 for a request that is not HTTP/1.1', async function () {
    const answer = lastResponse(await exchange(server, 'HELLO THERE\r\n\r\n'));
    expect(answer.status).to.equal(400);
    expect(answer.body).to.deep.equal({
      error: 'invalid_request',
      error_description: 'the request is not well-formed HTTP/1.1',
    });
  });

  it('a malformed request after one answered on the same (kept-alive) connection is answered too', async function () {
    const written = await exchange(
      server,
      'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header Line\r\n\r\n',
    );
    expect(written, 'the first request answered').to.match(/^HTTP\/1\.1 200 /);
    const second = lastResponse(written);
    expect(second.status, written).to.equal(400);
    expect(second.body.error).to.equal('invalid_request');
  });
});
