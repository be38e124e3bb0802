import { expect } from 'chai';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * A tenant's rule is checked beside the shared rules (so that it may use their helpers). Found
 * 2026-11-29: OPA's detail lines then told a key confined to the tenant the keys and types of a
 * shared rule's data, which GET /policy-rules refuses it.
 */
describe('Checks of a tenant rule tell nothing of the shared rules', function () {
  let server: TestServer;
  before(async function () {
    // Its own server: a shared rule of its own.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  it("answers a tenant rule's type error without the shared data's keys", async function () {
    const shared = await server.admin('POST', '/policy-rules', {
      kind: 'rego',
      path: 'arbiter/held/held.rego',
      content: 'package arbiter.held\nimport rego.v1\nblocked := {"held-secret-client": {"reason": "case-4711"}}\n',
    });
    expect(shared.status, JSON.stringify(shared.body)).to.equal(201);
    expect((await server.admin('POST', '/tenants', { id: 'held-ta' })).status).to.equal(201);
    const made = await server.admin('POST', '/api-keys', {
      name: 'held-author',
      role: 'policy-author',
      tenants: ['held-ta'],
    });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    const response = await server.request('/admin/api/policy-rules/validate', {
      method: 'POST',
      key: made.body.key,
      tenant: 'held-ta',
      json: {
        kind: 'rego',
        path: 'arbiter/probe/probe.rego',
        content: 'package arbiter.probe\nimport rego.v1\ny := data.arbiter.held.blocked.unknown\n',
      },
    });
    const body = (await response.json()) as { error_description: string };
    expect(response.status, JSON.stringify(body)).to.equal(400);
    expect(body.error_description).to.contain('undefined ref: data.arbiter.held.blocked.unknown');
    expect(body.error_description).not.to.contain('held-secret-client');
  });
});
