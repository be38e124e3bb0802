import { expect } from 'chai';
import { ADMIN_KEY, startTestServer, type TestServer } from '../support/server.js';
import { basic, confidentialClient } from '../support/oauth.js';
import { rawRequest } from '../support/raw-http.js';

const LIMIT = 5;

/** Each caller is its own loopback address; Linux routes all of 127.0.0.0/8 to lo. */
function adminCall(server: TestServer, from: string, key: string, headers: Record<string, string> = {}) {
  return rawRequest(server.url, { path: '/admin/api/clients', localAddress: from, headers: { 'X-Admin-API-Key': key, ...headers } });
}

describe('Throttling of authentication failures, and the caller address', function () {
  let server: TestServer;
  before(async function () {
    server = await startTestServer({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_SECONDS: '600', TRUSTED_PROXIES: '127.0.0.50' });
    await server.waitUntilReady();
  });
  after(async function () {
    await server?.close();
  });

  it('answers 429 with Retry-After after the configured number of wrong Admin keys, for that address only', async function () {
    for (let attempt = 0; attempt < LIMIT; attempt++) expect((await adminCall(server, '127.0.0.11', 'wrong-key-0123456789')).status).to.equal(401);
    const blocked = await adminCall(server, '127.0.0.11', 'wrong-key-0123456789');
    expect(blocked.status).to.equal(429);
    expect(Number(blocked.headers['retry-after'])).to.be.within(1, 600);
    expect(blocked.json().error).to.equal('too_many_requests');
    expect((await adminCall(server, '127.0.0.11', ADMIN_KEY)).status, 'even the right key waits').to.equal(429);
    expect((await adminCall(server, '127.0.0.12', ADMIN_KEY)).status, 'another caller').to.equal(200);
  });

  it('counts wrong client secrets at /token and Bearer failures at /introspect the same way', async function () {
    const secret = await confidentialClient(server, 'throttled-svc', { scopes: ['read'] });
    const token = (wrong: boolean, from: string) =>
      rawRequest(server.url, {
        method: 'POST',
        path: '/token',
        localAddress: from,
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: basic('throttled-svc', wrong ? 'not-the-secret' : secret) },
        body: 'grant_type=client_credentials&scope=read',
      });
    for (let attempt = 0; attempt < LIMIT; attempt++) expect((await token(true, '127.0.0.13')).status).to.equal(401);
    expect((await token(false, '127.0.0.13')).status, 'the right secret from the same address').to.equal(429);
    expect((await token(false, '127.0.0.14')).status, 'another caller').to.equal(200);
    const introspect = () => rawRequest(server.url, { method: 'POST', path: '/introspect', localAddress: '127.0.0.15', headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Bearer made-up' }, body: 'token=x' });
    for (let attempt = 0; attempt < LIMIT; attempt++) expect((await introspect()).status).to.equal(401);
    expect((await introspect()).status).to.equal(429);
  });

  it('ignores X-Forwarded-For from a caller that is not a configured proxy: neither the limit nor the audited address moves', async function () {
    for (let attempt = 0; attempt < LIMIT; attempt++) {
      const spoofed = await adminCall(server, '127.0.0.16', 'wrong-key-0123456789', { 'X-Forwarded-For': `198.51.100.${attempt + 1}`, 'User-Agent': 'spoofer' });
      expect(spoofed.status).to.equal(401);
    }
    expect((await adminCall(server, '127.0.0.16', ADMIN_KEY, { 'X-Forwarded-For': '198.51.100.99' })).status).to.equal(429);
    const audited = (await rawRequest(server.url, { path: '/admin/api/audit-logs?size=100', localAddress: '127.0.0.17', headers: { 'X-Admin-API-Key': ADMIN_KEY } })).json();
    const spoofers = audited.content.filter((entry: any) => entry.userAgent === 'spoofer');
    expect(spoofers).to.have.length(LIMIT);
    for (const entry of spoofers) expect(entry.ip).to.equal('127.0.0.16');
  });

  it('takes the address a configured proxy forwarded', async function () {
    await adminCall(server, '127.0.0.50', ADMIN_KEY, { 'X-Forwarded-For': '198.51.100.7', 'User-Agent': 'behind-proxy' });
    const audited = (await rawRequest(server.url, { path: '/admin/api/audit-logs?size=100', localAddress: '127.0.0.17', headers: { 'X-Admin-API-Key': ADMIN_KEY } })).json();
    const entry = audited.content.find((candidate: any) => candidate.userAgent === 'behind-proxy');
    expect(entry.ip).to.equal('198.51.100.7');
  });
});
