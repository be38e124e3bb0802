import { expect } from 'chai';
import { rawRequest } from '../support/raw-http.js';
import { withServer, type TestServer } from '../support/server.js';

/**
 * Requests a fuzzing review found answered 500 (found 2026-11-29): each now gets a clear 4xx.
 * oidc-provider builds its URLs from the request's host, and its device sign-in's return page
 * fails on a session it never stored.
 */
describe('Malformed requests answered 4xx, never 500', function () {
  let server: TestServer;
  before(async function () {
    server = await withServer();
  });

  it('refuses a Host (or trusted X-Forwarded-Host) that is no host with 400 invalid_request, at every page', async function () {
    const paths = ['/.well-known/openid-configuration', '/authorize?client_id=nobody', '/device', '/session/end'];
    for (const host of ['[::1', '[', 'a b', 'x:99999', '[zz]', 'a:b:c'])
      for (const path of paths) {
        const answer = await rawRequest(server.url, { path, headers: { Host: host } });
        expect(answer.status, `${host} ${path}: ${answer.text.slice(0, 200)}`).to.equal(400);
        expect(answer.json()).to.deep.equal({
          error: 'invalid_request',
          error_description: 'the Host header is not a valid host',
        });
      }
    // A host that is one still serves.
    expect((await rawRequest(server.url, { path: paths[0]!, headers: { Host: 'localhost:1' } })).status).to.equal(200);
  });

  it('refuses a compressed request body with 415, naming the encoding it takes (found 2026-11-30: read as its raw bytes)', async function () {
    const { gzipSync } = await import('node:zlib');
    for (const [path, type, body] of [
      ['/token', 'application/x-www-form-urlencoded', 'grant_type=client_credentials'],
      ['/register', 'application/json', '{"redirect_uris":["https://app.example/cb"]}'],
    ] as const) {
      const response = await server.request(path, {
        method: 'POST',
        headers: { 'Content-Type': type, 'Content-Encoding': 'gzip' },
        body: gzipSync(body),
      });
      expect(response.status, path).to.equal(415);
      expect(response.headers.get('accept-encoding')).to.equal('identity');
      expect(((await response.json()) as { error: string }).error).to.equal('invalid_request');
    }
  });

  it('answers anything but POST at /device/auth 405, and a device sign-in return without a known session 400', async function () {
    for (const path of ['/device/auth', '/device/auth/'])
      for (const method of ['GET', 'HEAD', 'PUT']) {
        const answer = await rawRequest(server.url, { method, path });
        expect(answer.status, `${method} ${path}`).to.equal(405);
        expect(answer.headers.allow).to.equal('POST');
      }
    for (const path of ['/device/x', '/DEVICE/x'])
      for (const cookie of [undefined, '_session=forged; _interaction_resume=forged'])
        for (const method of ['GET', 'HEAD']) {
          const answer = await rawRequest(server.url, { method, path, headers: cookie ? { Cookie: cookie } : {} });
          expect(answer.status, `${method} ${path} ${cookie ?? ''}: ${answer.text.slice(0, 200)}`).to.equal(400);
          // With a link back to the code page.
          if (method === 'GET')
            expect(answer.text)
              .to.contain('This form has expired')
              .and.match(/href="(\/|&#47;)device"/i);
        }
  });
});
