import { expect } from 'chai';
import { withServer, type TestServer } from '../support/server.js';

describe('Admin API key', function () {
  let server: TestServer;
  before(async function () {
    server = await withServer();
  });

  for (const [label, headers] of [
    ['without a key', {}],
    ['with a wrong key', { 'X-Admin-API-Key': 'wrong-key-of-some-length' }],
    ['with a key that is a prefix of the real one', { 'X-Admin-API-Key': 'test-admin-key' }],
  ] as const) {
    it(`answers 401 ${label}, for reads and writes`, async function () {
      for (const [method, path] of [
        ['GET', '/admin/api/clients'],
        ['POST', '/admin/api/subjects'],
        ['GET', '/admin/api/audit-logs'],
      ] as const) {
        const response = await server.request(path, {
          method,
          headers,
          ...(method === 'POST' ? { json: { subjectId: 'x' } } : {}),
        });
        expect(response.status, `${method} ${path}`).to.equal(401);
        expect(((await response.json()) as any).error).to.equal('unauthorized');
      }
    });
  }

  it('accepts the configured key', async function () {
    expect((await server.request('/admin/api/clients', { admin: true })).status).to.equal(200);
  });
});
