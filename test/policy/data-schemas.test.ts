import { expect } from 'chai';
import { clientCredentials, confidentialClient, policyInForce } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * Schemas for policy data (issue 37, point 2): Rego reads a mistyped entry as absent, so the
 * operator's `withheld_scopes: "write"` (a string), a misspelt `withheld_scope` and a `null` were
 * each accepted and the client got `read write` again. Every write of policy data is now checked
 * as the merged document against the pack's schema (policies/oauth/data.schema.json) or the
 * schema an author's entry brings; the 400 names the field; impact analysis uses the same check.
 */
describe('Policy data schemas', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: the positive cases change the shared bundle.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  const writeData = (dataKey: string, payload: unknown, extra: Record<string, unknown> = {}) =>
    server.admin('PUT', `/policy-data/by-key?dataKey=${dataKey}`, {
      dataKey,
      payload: JSON.stringify(payload),
      ...extra,
    });

  let clients = 0;
  for (const [what, entry, field] of [
    ['a string where a list belongs', { withheld_scopes: 'write' }, 'withheld_scopes must be array'],
    ['a misspelt field', { withheld_scope: ['write'] }, 'withheld_scope is not a known field'],
    ['a null list', { withheld_scopes: null }, 'withheld_scopes must be array'],
  ] as const) {
    it(`refuses ${what} in oauth.clients with a 400 naming the field, and the client keeps its narrowing`, async function () {
      const clientId = `schema-client-${++clients}`;
      const secret = await confidentialClient(server, clientId, { scopes: ['read', 'write'] });
      const withheld = await writeData('oauth.clients', { [clientId]: { withheld_scopes: ['write'] } });
      expect(withheld.status, JSON.stringify(withheld.body)).to.be.oneOf([200, 201]);
      await policyInForce(server);

      const refused = await writeData('oauth.clients', { [clientId]: entry });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
      expect(refused.body).to.include({ error: 'invalid_request', field: 'payload' });
      expect(refused.body.error_description).to.contain(`data.oauth.clients.${clientId}.${field}`);

      const token = await clientCredentials(server, clientId, secret, { scope: 'read write' });
      expect(token.status, JSON.stringify(token.body)).to.equal(200);
      expect(token.body.scope).to.equal('read');
    });
  }

  it('checks the merged document: a deeper key is held to the schema of the key it lands in', async function () {
    const refused = await writeData('oauth.resource_types', { 'urn:example:x': { scopes: 'read' } });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
    expect(refused.body.error_description).to.contain('data.oauth.resource_types.urn:example:x.scopes must be array');
  });

  it("holds an author's own key to the schema its entry brings, and refuses an unsafe schema", async function () {
    const schema = JSON.stringify({
      type: 'object',
      additionalProperties: false,
      properties: { max_per_day: { type: 'integer', minimum: 0 } },
    });
    const wrong = await writeData('acme_limits', { max_per_day: 'ten' }, { schema });
    expect(wrong.status, JSON.stringify(wrong.body)).to.equal(400);
    expect(wrong.body.error_description).to.contain('data.acme_limits.max_per_day must be integer');

    const right = await writeData('acme_limits', { max_per_day: 10 }, { schema });
    expect(right.status, JSON.stringify(right.body)).to.be.oneOf([200, 201]);

    // A later write of the entry is held to it again.
    const later = await writeData('acme_limits', { max_per_day: -1 }, { schema });
    expect(later.status).to.equal(400);
    expect(later.body.error_description).to.contain('data.acme_limits.max_per_day must be >= 0');

    const regex = JSON.stringify({ type: 'string', pattern: '^(a+)+$' });
    const unsafe = await writeData('acme_names', 'aaa', { schema: regex });
    expect(unsafe.status, JSON.stringify(unsafe.body)).to.equal(400);
    expect(unsafe.body.error_description).to.contain('uses "pattern"');

    const remote = JSON.stringify({ $ref: 'https://attacker.example/schema.json' });
    const outside = await writeData('acme_names', 'aaa', { schema: remote });
    expect(outside.status).to.equal(400);
    expect(outside.body.error_description).to.contain('refers outside itself');

    // Found 2026-11-30: answered with the schema compiler's own TypeError ("id.replace is not a function").
    const numbered = await writeData('acme_names', 'aaa', { schema: JSON.stringify({ $id: 5 }) });
    expect(numbered.status).to.equal(400);
    expect(numbered.body.error_description).to.contain('gives "$id" a value that is no string');
    // A property that happens to be named so is a property.
    const named = JSON.stringify({ type: 'object', properties: { $id: { type: 'string' } } });
    const property = await writeData('acme_ids', { $id: 'x' }, { schema: named });
    expect(property.status, JSON.stringify(property.body)).to.be.oneOf([200, 201]);
  });

  it('refuses a data change in impact analysis with the same 400', async function () {
    const tried = await server.admin('POST', '/policy-impact', {
      changes: [
        {
          collection: 'policy-data',
          op: 'create',
          record: { dataKey: 'oauth.software_statements', payload: JSON.stringify({ denylist: 'one-app' }) },
        },
      ],
    });
    expect(tried.status, JSON.stringify(tried.body)).to.equal(400);
    expect(JSON.stringify(tried.body)).to.contain('data.oauth.software_statements.denylist must be array');
  });
});
