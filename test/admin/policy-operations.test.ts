import { expect } from 'chai';
import { clientCredentials, confidentialClient, eventually } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/** The request fields of a policy rule (the Admin API's PUT takes the same body as POST). */
const RULE_FIELDS = ['version', 'kind', 'path', 'content', 'enabled', 'digest', 'tenantId'];

function ruleBody(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(RULE_FIELDS.filter((field) => field in record).map((field) => [field, record[field]]));
}

const REGO = (name: string) => `package arbiter.${name}\n\nimport rego.v1\n\ndecision := {"allow": true}\n`;

/**
 * The policy operations of the Admin API: the engine's parse check on rules, the upserts by
 * path and by data key, bundledOnly, and a rule change reaching live decisions at the next poll.
 */
describe('Admin API policy operations', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: the last test disables a bundled decision for a while.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  const rulesAt = async (path: string) =>
    ((await server.admin('GET', '/policy-rules')).body as any[]).filter((rule) => rule.path === path);
  const dataAt = async (dataKey: string) =>
    ((await server.admin('GET', '/policy-data')).body as any[]).filter((entry) => entry.dataKey === dataKey);

  describe('the engine check of a rule', function () {
    it('refuses broken Rego with 400 quoting OPA, naming content, and stores nothing', async function () {
      const path = 'arbiter/broken.rego';
      const response = await server.admin('POST', '/policy-rules', {
        version: null,
        kind: 'rego',
        path,
        content: 'package arbiter.x\n\nallow if {',
      });
      expect(response.status, JSON.stringify(response.body)).to.equal(400);
      expect(response.body.error).to.equal('invalid_request');
      expect(response.body.error_description).to.contain('rego_parse_error');
      expect(response.body.field).to.equal('content');
      expect(await rulesAt(path)).to.deep.equal([]);
    });

    it('refuses broken Cedar with 400 quoting Cedar, naming content, and stores nothing', async function () {
      const path = 'arbiter/broken.cedar';
      const response = await server.admin('POST', '/policy-rules', {
        version: null,
        kind: 'cedar',
        path,
        content: 'permit (principal, action, resource) when {',
      });
      expect(response.status, JSON.stringify(response.body)).to.equal(400);
      expect(response.body.error).to.equal('invalid_request');
      expect(response.body.error_description).to.contain('Cedar parse error').and.contain('unexpected end of input');
      expect(response.body.field).to.equal('content');
      expect(await rulesAt(path)).to.deep.equal([]);
    });

    it('names path when the path does not fit the kind', async function () {
      const response = await server.admin('POST', '/policy-rules', {
        version: null,
        kind: 'cedar',
        path: 'arbiter/wrong.rego',
        content: 'permit (principal, action, resource);',
      });
      expect(response.status, JSON.stringify(response.body)).to.equal(400);
      expect(response.body.field).to.equal('path');
      expect(await rulesAt('arbiter/wrong.rego')).to.deep.equal([]);
    });

    it('applies the same check to an upsert', async function () {
      const path = 'arbiter/broken-upsert.rego';
      const response = await server.admin('PUT', `/policy-rules/by-path?path=${encodeURIComponent(path)}`, {
        version: 'v1',
        kind: 'rego',
        path,
        content: 'package arbiter.x\n\nallow if {',
      });
      expect(response.status).to.equal(400);
      expect(response.body.field).to.equal('content');
      expect(await rulesAt(path)).to.deep.equal([]);
    });
  });

  describe('the check of the whole bundle a write would make', function () {
    it('refuses a rule that clashes with another file of its package (400 naming the clash), and stores nothing', async function () {
      const path = 'arbiter/token_second_default.rego';
      const response = await server.admin('POST', '/policy-rules', {
        version: null,
        kind: 'rego',
        path,
        content: 'package arbiter.token\n\ndefault decision := {"allow": true}\n',
      });
      expect(response.status, JSON.stringify(response.body)).to.equal(400);
      expect(response.body.field).to.equal('content');
      expect(response.body.error_description)
        .to.contain('the policy bundle would not compile')
        .and.match(/multiple default rules|conflict/);
      expect(await rulesAt(path)).to.deep.equal([]);
      // The same file as a versioned draft is not bundled, so it clashes with nothing.
      const draft = await server.admin('POST', '/policy-rules', {
        version: 'draft',
        kind: 'rego',
        path,
        content: 'package arbiter.token\n\ndefault decision := {"allow": true}\n',
      });
      expect(draft.status, JSON.stringify(draft.body)).to.equal(201);
    });

    it('refuses data whose key lands on a rule of the bundle, and stores nothing', async function () {
      const response = await server.admin('PUT', '/policy-data/by-key?dataKey=arbiter.token', {
        dataKey: 'arbiter.token',
        payload: JSON.stringify({ decision: { allow: true } }),
      });
      expect(response.status, JSON.stringify(response.body)).to.equal(400);
      expect(response.body.field).to.equal('payload');
      expect(response.body.error_description).to.contain('conflicting rule for data path arbiter/token/decision');
      expect(await dataAt('arbiter.token')).to.deep.equal([]);
    });

    it('refuses data nested too deep to serve (it would break the bundle for everyone)', async function () {
      const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
      const response = await server.admin('PUT', '/policy-data/by-key?dataKey=too.deep', {
        dataKey: 'too.deep',
        payload: deep,
      });
      expect(response.status, JSON.stringify(response.body).slice(0, 200)).to.equal(400);
      expect(response.body.field).to.equal('payload');
      expect(await dataAt('too.deep')).to.deep.equal([]);
    });

    it('refuses a data key with __proto__ as a part (400, field dataKey): merging it wrote into every object of the server', async function () {
      for (const dataKey of ['__proto__.polluted', 'oauth.__proto__.polluted', '__proto__']) {
        const payload = JSON.stringify({ admin: true });
        const upserted = await server.admin('PUT', `/policy-data/by-key?dataKey=${dataKey}`, { dataKey, payload });
        expect(upserted.status, `${dataKey}: ${JSON.stringify(upserted.body)}`).to.equal(400);
        expect(upserted.body.field).to.equal('dataKey');
        const posted = await server.admin('POST', '/policy-data', { dataKey, payload, version: null });
        expect(posted.status, `${dataKey}: ${JSON.stringify(posted.body)}`).to.equal(400);
        expect(posted.body.field).to.equal('dataKey');
        expect(await dataAt(dataKey)).to.deep.equal([]);
      }
      // The server runs in this process: its objects are this test's.
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      expect(({} as Record<string, unknown>).admin).to.equal(undefined);
    });

    it('accepts writes that keep the bundle whole (a helper package, Cedar rules ride along)', async function () {
      const helper = await server.admin('POST', '/policy-rules', {
        version: null,
        kind: 'rego',
        path: 'arbiter/helpers/extra.rego',
        content: 'package arbiter.helpers.extra\n\nanswer := 42\n',
      });
      expect(helper.status, JSON.stringify(helper.body)).to.equal(201);
      const cedar = await server.admin('POST', '/policy-rules', {
        version: null,
        kind: 'cedar',
        path: 'bundle-check.cedar',
        content: 'forbid (principal, action == Action::"never", resource);',
      });
      expect(cedar.status, JSON.stringify(cedar.body)).to.equal(201);
    });
  });

  describe('the version of a rule', function () {
    it('is null when the body leaves it out: the rule is live, part of the bundle', async function () {
      const revision = async () => ((await (await server.request('/healthz')).json()) as any).policyRevision.store;
      const before = await revision();
      const created = await server.admin('POST', '/policy-rules', {
        kind: 'rego',
        path: 'arbiter/helpers/versionless.rego',
        content: 'package arbiter.helpers.versionless\n\nanswer := 7\n',
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(created.body).to.include({ version: null, enabled: true });
      expect(await revision(), 'the bundle revision moved').not.to.equal(before);
      // A versioned draft is not bundled: the revision stays.
      const bundled = await revision();
      const draft = await server.admin('POST', '/policy-rules', {
        version: 'draft',
        kind: 'rego',
        path: 'arbiter/helpers/drafted.rego',
        content: 'package arbiter.helpers.drafted\n\nanswer := 8\n',
      });
      expect(draft.status, JSON.stringify(draft.body)).to.equal(201);
      expect(await revision()).to.equal(bundled);
    });
  });

  describe('PUT /policy-rules/by-path', function () {
    const path = 'arbiter/upserted.rego';
    const url = `/policy-rules/by-path?path=${encodeURIComponent(path)}`;

    it('creates (201) when absent and replaces (200, same id) when present', async function () {
      const created = await server.admin('PUT', url, { version: 'v1', kind: 'rego', path, content: REGO('upserted') });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(created.body.path).to.equal(path);
      expect(created.body.id).to.be.a('number');

      const replaced = await server.admin('PUT', url, {
        version: 'v2',
        kind: 'rego',
        path,
        content: REGO('upserted'),
        enabled: false,
      });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
      expect(replaced.body.id).to.equal(created.body.id);
      expect(replaced.body.createdAt).to.equal(created.body.createdAt);
      expect(replaced.body).to.include({ version: 'v2', enabled: false });
      expect((await rulesAt(path)).map((rule) => rule.id)).to.deep.equal([created.body.id]);
    });

    it('refuses a body whose path differs from the query (400, field path)', async function () {
      const response = await server.admin('PUT', url, {
        version: 'v3',
        kind: 'rego',
        path: 'arbiter/other.rego',
        content: REGO('other'),
      });
      expect(response.status).to.equal(400);
      expect(response.body.error).to.equal('invalid_request');
      expect(response.body.field).to.equal('path');
      expect(await rulesAt('arbiter/other.rego')).to.deep.equal([]);
    });

    it('refuses a missing path query (400)', async function () {
      const response = await server.admin('PUT', '/policy-rules/by-path', {
        version: 'v1',
        kind: 'rego',
        path: 'arbiter/noquery.rego',
        content: REGO('noquery'),
      });
      expect(response.status).to.equal(400);
      expect(response.body.field).to.equal('path');
      expect(await rulesAt('arbiter/noquery.rego')).to.deep.equal([]);
    });
  });

  describe('PUT /policy-data/by-key', function () {
    const dataKey = 'upserted_data';
    const url = `/policy-data/by-key?dataKey=${dataKey}`;

    it('creates (201) when absent and replaces (200, same id) when present', async function () {
      const created = await server.admin('PUT', url, { dataKey, payload: '{"n":1}', version: 'draft' });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(created.body.id).to.be.a('number');

      const replaced = await server.admin('PUT', url, { dataKey, payload: '{"n":2}', version: 'draft' });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
      expect(replaced.body.id).to.equal(created.body.id);
      expect(replaced.body.payload).to.equal('{"n":2}');
      expect((await dataAt(dataKey)).map((entry) => entry.id)).to.deep.equal([created.body.id]);
    });

    it('refuses a body whose dataKey differs from the query (400, field dataKey)', async function () {
      const response = await server.admin('PUT', url, { dataKey: 'other_data', payload: '{}' });
      expect(response.status).to.equal(400);
      expect(response.body.field).to.equal('dataKey');
      expect(await dataAt('other_data')).to.deep.equal([]);
    });

    it('refuses a missing dataKey query (400)', async function () {
      const response = await server.admin('PUT', '/policy-data/by-key', { dataKey: 'noquery_data', payload: '{}' });
      expect(response.status).to.equal(400);
      expect(response.body.field).to.equal('dataKey');
      expect(await dataAt('noquery_data')).to.deep.equal([]);
    });

    it('refuses a payload that is not JSON (400, field payload), by upsert and by POST', async function () {
      const upserted = await server.admin('PUT', '/policy-data/by-key?dataKey=not_json', {
        dataKey: 'not_json',
        payload: '{not json',
        version: 'draft',
      });
      expect(upserted.status).to.equal(400);
      expect(upserted.body.error).to.equal('invalid_request');
      expect(upserted.body.field).to.equal('payload');
      const posted = await server.admin('POST', '/policy-data', { dataKey: 'not_json', payload: 'undefined' });
      expect(posted.status).to.equal(400);
      expect(posted.body.field).to.equal('payload');
      expect(await dataAt('not_json')).to.deep.equal([]);
    });
  });

  describe('GET /policy-data?bundledOnly', function () {
    before(async function () {
      for (const body of [
        { dataKey: 'listed_bundled', payload: '{"b":1}' },
        { dataKey: 'listed_versioned', payload: '{"v":1}', version: 'draft' },
      ]) {
        const created = await server.admin('POST', '/policy-data', body);
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
      }
      expect(
        (
          await server.admin('POST', '/policy-data', {
            dataKey: 'listed_tenanted',
            payload: '{"t":1}',
            tenantId: 'tenant-p',
          })
        ).status,
      ).to.equal(201);
    });

    it('marks each entry with inBundle: true exactly when it has no tenantId and no version', async function () {
      for (const query of ['', '?tenantId=tenant-p']) {
        const { status, body } = await server.admin('GET', `/policy-data${query}`);
        expect(status).to.equal(200);
        expect(body).to.be.an('array').that.is.not.empty;
        for (const entry of body) expect(entry.inBundle, entry.dataKey).to.equal(!entry.tenantId && !entry.version);
      }
      const tenanted = (await server.admin('GET', '/policy-data?tenantId=tenant-p')).body;
      expect(tenanted.map((entry: any) => [entry.dataKey, entry.inBundle])).to.deep.equal([['listed_tenanted', false]]);
    });

    it('true returns only the bundled entries; false and absent return them all', async function () {
      const all = await server.admin('GET', '/policy-data');
      const keys = all.body.map((entry: any) => entry.dataKey);
      expect(keys).to.include.members(['oauth', 'listed_bundled', 'listed_versioned']);
      expect(keys).not.to.include('listed_tenanted');

      const explicitFalse = await server.admin('GET', '/policy-data?bundledOnly=false');
      expect(explicitFalse.status).to.equal(200);
      expect(explicitFalse.body).to.deep.equal(all.body);

      const bundled = await server.admin('GET', '/policy-data?bundledOnly=true');
      expect(bundled.status).to.equal(200);
      expect(bundled.body.map((entry: any) => entry.dataKey))
        .to.include.members(['oauth', 'listed_bundled'])
        .and.not.include('listed_versioned');
      for (const entry of bundled.body) {
        expect(entry.inBundle).to.equal(true);
        expect(entry.tenantId).to.equal(null);
        expect(entry.version ?? null).to.equal(null);
      }
      expect(bundled.body).to.deep.equal(all.body.filter((entry: any) => entry.inBundle));
    });

    it('refuses a value that is not a boolean (400)', async function () {
      const response = await server.admin('GET', '/policy-data?bundledOnly=maybe');
      expect(response.status).to.equal(400);
      expect(response.body.error).to.equal('invalid_request');
      expect(response.body.field).to.equal('bundledOnly');
    });
  });

  describe('a rule change through the Admin API', function () {
    it('reaches live decisions at the next poll: disabling arbiter/token/token.rego fails /token closed, re-enabling restores it', async function () {
      const secret = await confidentialClient(server, 'poll-machine', { scopes: ['read'] });
      const token = () => clientCredentials(server, 'poll-machine', secret, { scope: 'read' });
      const before = await token();
      expect(before.status, JSON.stringify(before.body)).to.equal(200);

      const [rule] = await rulesAt('arbiter/token/token.rego');
      expect(rule, 'the seeded token rule').to.be.an('object');
      const put = (enabled: boolean) => server.admin('PUT', `/policy-rules/${rule.id}`, { ...ruleBody(rule), enabled });

      const disabled = await put(false);
      expect(disabled.status, JSON.stringify(disabled.body)).to.equal(200);
      expect(disabled.body.enabled).to.equal(false);
      try {
        let failed: Awaited<ReturnType<typeof token>> | undefined;
        await eventually(async () => {
          failed = await token();
          return failed.status === 503;
        });
        expect(failed!.body.error).to.equal('temporarily_unavailable');
        const audit = await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc');
        expect(audit.status).to.equal(200);
        expect(audit.body.content[0].outcome).to.equal('error');
      } finally {
        const enabled = await put(true);
        expect(enabled.status, JSON.stringify(enabled.body)).to.equal(200);
        expect(enabled.body.enabled).to.equal(true);
      }
      await eventually(async () => (await token()).status === 200);
    });
  });
});
