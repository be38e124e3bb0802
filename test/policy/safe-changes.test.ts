import { expect } from 'chai';
import { POLICY_RULES } from '../../src/policy/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import { clientCredentials, confidentialClient, eventually, policyInForce } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/** The reproduction: a second complete definition of data.arbiter.token.decision, a conflict only evaluation shows. */
const CONFLICT = 'package arbiter.token\n\ndecision := {"allow": true}\n';

/** A rule that conflicts with the pack's token decision for one client only. */
const conflictFor = (clientId: string) =>
  `package arbiter.token\n\ndecision := {"allow": false} if input.client.client_id == "${clientId}"\n`;

/** OPA's error with the location it gives: one of the conflicting definitions (which one is OPA's choice). */
const CONFLICT_AT =
  /eval_conflict_error: complete rules must not produce multiple outputs \(arbiter\/[\w/]+\.rego:\d+\)/;

const rego = (path: string, content: string) => ({ version: null, kind: 'rego', path, content });

/**
 * Policy changes that cannot take the service down: a rule or data write (or delete) through the
 * Admin API is refused with 400 unless the bundle it makes decides every decision point without
 * an error on the contract's examples and on recently recorded inputs, with OPA's message and
 * the rule's file:line; a live bundle that cannot decide makes /healthz 503 `degraded` naming the
 * point and OPA's error, which the log, the audit entry and the replay carry too; rules and data
 * keep their versions (list, diff, roll back, itself checked). Real HTTP, real OPA.
 */
describe('Safe policy changes', function () {
  let server: TestServer;
  const logLines: string[] = [];

  before(async function () {
    // Its own server: these tests break the shared bundle and make /healthz degraded on purpose.
    server = await readyServer(
      { LOG_LEVEL: 'warn', POLICY_HISTORY_VERSIONS: '5' },
      { logStream: { write: (line: string) => void logLines.push(line) } },
    );
  });
  after(async function () {
    await server?.close();
  });

  const rulesAt = async (path: string) =>
    ((await server.admin('GET', '/policy-rules')).body as any[]).filter((rule) => rule.path === path);
  const health = async () => {
    const response = await server.request('/healthz');
    return { status: response.status, body: (await response.json()) as any };
  };
  const storeRevision = async () => (await health()).body.policyRevision.store as string;

  describe('a change whose bundle cannot decide', function () {
    it("is the reproduction's 400, with OPA's message and the rule's file:line, and nothing is stored", async function () {
      const revision = await storeRevision();
      const secret = await confidentialClient(server, 'safe-before', { scopes: ['read'] });
      const created = await server.admin('POST', '/policy-rules', rego('arbiter/token2.rego', CONFLICT));
      expect(created.status, JSON.stringify(created.body)).to.equal(400);
      expect(created.body).to.include({ error: 'invalid_request', field: 'content' });
      expect(created.body.error_description)
        .to.contain('the policy bundle could not decide with this change')
        .and.contain('data.arbiter.token.decision')
        .and.contain('eval_conflict_error: complete rules must not produce multiple outputs')
        .and.contain('(arbiter/token2.rego:3)')
        .and.match(/on the contract example "token[^"]*"/)
        .and.match(
          /data\.arbiter\.token\.decision is defined at arbiter\/token\/token\.rego:\d+, arbiter\/token2\.rego:3$/,
        );

      const upserted = await server.admin(
        'PUT',
        '/policy-rules/by-path?path=arbiter/token2.rego',
        rego('arbiter/token2.rego', CONFLICT),
      );
      expect(upserted.status).to.equal(400);
      const validated = await server.admin('POST', '/policy-rules/validate', rego('arbiter/token2.rego', CONFLICT));
      expect(validated.status).to.equal(400);
      expect(validated.body.error_description).to.equal(created.body.error_description);

      expect(await rulesAt('arbiter/token2.rego')).to.deep.equal([]);
      expect(await storeRevision()).to.equal(revision);
      const token = await clientCredentials(server, 'safe-before', secret, { scope: 'read' });
      expect(token.status, 'tokens are still issued').to.equal(200);
    });

    it('refuses a rule that fails only on an input recorded in the audit log, naming the entry', async function () {
      const secret = await confidentialClient(server, 'recorded-app', { scopes: ['read'] });
      expect((await clientCredentials(server, 'recorded-app', secret, { scope: 'read' })).status).to.equal(200);
      const entry = (await server.admin('GET', '/audit-logs?endpoint=/token&clientId=recorded-app&size=1')).body
        .content[0];

      const refused = await server.admin(
        'POST',
        '/policy-rules',
        rego('arbiter/recorded.rego', conflictFor('recorded-app')),
      );
      expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
      expect(refused.body.error_description)
        .to.contain(`the input recorded in audit entry ${entry.id}`)
        .and.contain('with this change (rule arbiter/recorded.rego)')
        .and.match(CONFLICT_AT);
      expect(await rulesAt('arbiter/recorded.rego')).to.deep.equal([]);
    });

    it('tries no input of the decision playground: what a read-only key evaluates is not traffic and blocks no change', async function () {
      const secret = await confidentialClient(server, 'traffic-app', { scopes: ['read'] });
      expect((await clientCredentials(server, 'traffic-app', secret, { scope: 'read' })).status).to.equal(200);
      const recorded = (await server.admin('GET', '/audit-logs?endpoint=/token&clientId=traffic-app&size=1')).body
        .content[0];
      const reader = await server.admin('POST', '/api-keys', { name: 'safe-reader', role: 'read-only' });
      expect(reader.status, JSON.stringify(reader.body)).to.equal(201);
      const input = { ...recorded.policyInput, client: { ...recorded.policyInput.client, client_id: 'only-asked' } };
      const asked = await server.request('/admin/api/decisions', {
        method: 'POST',
        key: reader.body.key,
        json: { point: 'token', input },
      });
      expect(asked.status, await asked.clone().text()).to.equal(200);

      const created = await server.admin(
        'POST',
        '/policy-rules',
        rego('arbiter/asked.rego', conflictFor('only-asked')),
      );
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect((await server.admin('DELETE', `/policy-rules/${created.body.id}`)).status).to.equal(204);
    });

    it('refuses a data change under which a rule cannot decide, naming the rule', async function () {
      const flags = (frozen: boolean) => ({
        dataKey: 'safe_flags',
        payload: JSON.stringify({ freeze_tokens: frozen }),
      });
      expect((await server.admin('PUT', '/policy-data/by-key?dataKey=safe_flags', flags(false))).status).to.equal(201);
      const freeze = 'package arbiter.token\n\ndecision := {"allow": false} if data.safe_flags.freeze_tokens\n';
      const rule = await server.admin('POST', '/policy-rules', rego('arbiter/freeze.rego', freeze));
      expect(rule.status, JSON.stringify(rule.body)).to.equal(201);

      const refused = await server.admin('PUT', '/policy-data/by-key?dataKey=safe_flags', flags(true));
      expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
      expect(refused.body.field).to.equal('payload');
      expect(refused.body.error_description).to.contain('(data safe_flags)').and.match(CONFLICT_AT);
      const stored = ((await server.admin('GET', '/policy-data')).body as any[]).find(
        (entry) => entry.dataKey === 'safe_flags',
      );
      expect(JSON.parse(stored.payload)).to.deep.equal({ freeze_tokens: false });

      expect((await server.admin('DELETE', `/policy-rules/${rule.body.id}`)).status).to.equal(204);
    });

    it('refuses a rule whose decision does not fit the result schema', async function () {
      const path = 'arbiter/delegation/delegation.rego';
      const checked = await server.admin(
        'POST',
        '/policy-rules/validate',
        rego(path, 'package arbiter.delegation\n\ndecision := {"allow": "yes"}\n'),
      );
      expect(checked.status, JSON.stringify(checked.body)).to.equal(400);
      expect(checked.body.error_description)
        .to.contain('malformed decision from data.arbiter.delegation.decision')
        .and.match(/, on the contract example "delegation[^"]*"$/);
    });

    it('refuses a delete that leaves the bundle unable to compile, and keeps the rule', async function () {
      const [lib] = await rulesAt('arbiter/lib/lib.rego');
      const refused = await server.admin('DELETE', `/policy-rules/${lib.id}`);
      expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
      expect(refused.body.error_description).to.contain('the policy bundle would not compile');
      expect((await server.admin('GET', `/policy-rules/${lib.id}`)).status).to.equal(200);
    });
  });

  describe('a live bundle that cannot decide', function () {
    it("makes /healthz 503 degraded naming the point and OPA's error, which the log, the audit entry and the replay carry", async function () {
      // Accepted: no example and no recorded input is this client's, so nothing shows the conflict yet.
      const rule = await server.admin('POST', '/policy-rules', rego('arbiter/late.rego', conflictFor('late-app')));
      expect(rule.status, JSON.stringify(rule.body)).to.equal(201);
      await policyInForce(server);
      expect((await health()).status).to.equal(200);

      const secret = await confidentialClient(server, 'late-app', { scopes: ['read'] });
      const refused = await clientCredentials(server, 'late-app', secret, { scope: 'read' });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(503);
      expect(refused.body.error).to.equal('temporarily_unavailable');

      const degraded = await health();
      expect(degraded.status).to.equal(503);
      expect(degraded.body.status).to.equal('degraded');
      expect(degraded.body.policy)
        .to.contain('the policy in force cannot decide token')
        .and.match(CONFLICT_AT)
        .and.contain('arbiter/late.rego:3');
      expect(degraded.body.policyFaults).to.have.length(1);
      expect(degraded.body.policyFaults[0]).to.include({ point: 'token', failing: true, failed: 1, decisions: 1 });

      const entry = (await server.admin('GET', '/audit-logs?endpoint=/token&clientId=late-app&size=1')).body.content[0];
      expect(entry.outcome).to.equal('error');
      expect(entry.policyDecision.engineError).to.match(CONFLICT_AT);
      const logged = logLines
        .map((line) => JSON.parse(line))
        .find((line) => line.msg === 'policy decision failed closed');
      expect(logged).to.include({ point: 'token' });
      expect(logged.engineError).to.match(CONFLICT_AT);
      const replay = await server.admin('POST', `/audit-logs/${entry.id}/replay`);
      expect(replay.body.now.engines.rego.reason).to.match(CONFLICT_AT);

      // While the live bundle fails on that recorded input, only a change that mends it is taken.
      const unrelated = await server.admin(
        'POST',
        '/policy-rules',
        rego('arbiter/unrelated.rego', 'package arbiter.unrelated\n\nx := 1\n'),
      );
      expect(unrelated.status).to.equal(400);
      expect(unrelated.body.error_description).to.contain(`the input recorded in audit entry ${entry.id}`);

      expect((await server.admin('DELETE', `/policy-rules/${rule.body.id}`)).status).to.equal(204);
      await policyInForce(server);
      expect((await health()).body).to.include({ status: 'ok' });
      expect((await clientCredentials(server, 'late-app', secret, { scope: 'read' })).status).to.equal(200);
    });

    it('is found on the contract examples without any traffic (a bundle written to the store directly)', async function () {
      // No Admin API write can store this bundle any more: the test writes the store itself, as an old node or a restore might.
      const rules = server.store.collection(POLICY_RULES, DEFAULT_TENANT);
      const now = new Date().toISOString();
      const id = await server.store.nextSequence(POLICY_RULES.name);
      await rules.insert({
        id,
        ...rego('arbiter/token2.rego', CONFLICT),
        enabled: true,
        digest: null,
        tenantId: null,
        createdAt: now,
        updatedAt: now,
      });
      try {
        await policyInForce(server);
        const degraded = await health();
        expect(degraded.status).to.equal(503);
        expect(degraded.body.status).to.equal('degraded');
        expect(degraded.body.policyFaults[0]).to.include({ point: 'token', failing: true });
        expect(degraded.body.policyFaults[0].error)
          .to.contain('eval_conflict_error')
          .and.contain('(arbiter/token2.rego:3)')
          .and.contain("on the contract's examples");
      } finally {
        await rules.delete(id);
      }
      await policyInForce(server);
      await eventually(async () => (await health()).status === 200);
    });
  });

  describe('history', function () {
    const path = 'arbiter/history_demo.rego';
    const content = (answer: number) => `package arbiter.history_demo\n\nanswer := ${answer}\n`;
    let id: number;

    it('lists the versions of a rule, shows one, diffs it and rolls back in one call', async function () {
      const created = await server.admin('POST', '/policy-rules', rego(path, content(1)));
      expect(created.status).to.equal(201);
      id = created.body.id;
      const replaced = await server.admin('PUT', `/policy-rules/${id}`, rego(path, content(2)));
      expect(replaced.status).to.equal(200);

      const listed = await server.admin('GET', `/policy-rules/${id}/history`);
      expect(listed.status).to.equal(200);
      expect(listed.body.map((version: any) => [version.number, version.action])).to.deep.equal([
        [2, 'replace'],
        [1, 'create'],
      ]);
      expect(listed.body[0].fields).to.include({ path, kind: 'rego' }).and.not.have.property('content');

      const first = await server.admin('GET', `/policy-rules/${id}/history/1`);
      expect(first.body.record.content).to.equal(content(1));

      const diff = await server.admin('GET', `/policy-rules/${id}/history/1/diff`);
      expect(diff.body).to.include({ from: 1, to: 'current' });
      expect(diff.body.diff).to.equal(
        `--- ${path} (version 1)\n+++ ${path} (current)\n@@ -1,3 +1,3 @@\n package arbiter.history_demo\n \n-answer := 1\n+answer := 2\n`,
      );
      expect((await server.admin('GET', `/policy-rules/${id}/history/1/diff?to=2`)).body.diff).to.equal(
        diff.body.diff.replace('(current)', '(version 2)'),
      );

      const rolledBack = await server.admin('POST', `/policy-rules/${id}/history/1/rollback`);
      expect(rolledBack.status, JSON.stringify(rolledBack.body)).to.equal(200);
      expect(rolledBack.body).to.include({ id, content: content(1) });
      expect((await server.admin('GET', `/policy-rules/${id}`)).body.content).to.equal(content(1));
      const after = (await server.admin('GET', `/policy-rules/${id}/history`)).body;
      expect(after[0]).to.include({ number: 3, action: 'rollback', rolledBackTo: 1 });
      await policyInForce(server);
    });

    it('brings a deleted rule back under its id', async function () {
      expect((await server.admin('DELETE', `/policy-rules/${id}`)).status).to.equal(204);
      const versions = (await server.admin('GET', `/policy-rules/${id}/history`)).body;
      expect(versions[0]).to.include({ action: 'delete', deleted: true });
      expect(
        (await server.admin('POST', `/policy-rules/${id}/history/${versions[0].number}/rollback`)).status,
      ).to.equal(400);
      const restored = await server.admin('POST', `/policy-rules/${id}/history/2/rollback`);
      expect(restored.status, JSON.stringify(restored.body)).to.equal(200);
      expect((await server.admin('GET', `/policy-rules/${id}`)).body).to.include({ path, content: content(2) });
    });

    it('keeps POLICY_HISTORY_VERSIONS versions per record, the newest', async function () {
      for (let answer = 10; answer < 14; answer += 1)
        expect((await server.admin('PUT', `/policy-rules/${id}`, rego(path, content(answer)))).status).to.equal(200);
      const numbers = ((await server.admin('GET', `/policy-rules/${id}/history`)).body as any[]).map(
        (version) => version.number,
      );
      expect(numbers).to.deep.equal([9, 8, 7, 6, 5]);
      expect((await server.admin('GET', `/policy-rules/${id}/history/1`)).status).to.equal(404);
    });

    it('starts the history of a record written before it with a baseline, and diffs data as pretty-printed JSON', async function () {
      const oauth = ((await server.admin('GET', '/policy-data')).body as any[]).find(
        (entry) => entry.dataKey === 'oauth',
      );
      const data = JSON.parse(oauth.payload);
      const saved = await server.admin('PUT', `/policy-data/${oauth.id}`, {
        dataKey: 'oauth',
        // A field the pack's schema knows (policies/oauth/data.schema.json refuses unknown ones).
        payload: JSON.stringify({ ...data, rar_only_types: { 'urn:history:note': { description: 'added' } } }),
      });
      expect(saved.status, JSON.stringify(saved.body)).to.equal(200);
      const versions = (await server.admin('GET', `/policy-data/${oauth.id}/history`)).body;
      expect(versions.map((version: any) => version.action)).to.deep.equal(['replace', 'baseline']);
      const diff = (await server.admin('GET', `/policy-data/${oauth.id}/history/1/diff`)).body.diff as string;
      expect(diff)
        .to.contain('+    "urn:history:note": {')
        .and.match(/^--- oauth \(version 1\)/);
      expect((await server.admin('POST', `/policy-data/${oauth.id}/history/1/rollback`)).status).to.equal(200);
      await policyInForce(server);
    });

    it('checks a rollback like any change: one to a version that can no longer decide is refused', async function () {
      const guard = 'arbiter/rollback_guard.rego';
      const created = await server.admin('POST', '/policy-rules', rego(guard, conflictFor('rollback-app')));
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const harmless = await server.admin(
        'PUT',
        `/policy-rules/${created.body.id}`,
        rego(guard, 'package arbiter.token\n\nunused := true\n'),
      );
      expect(harmless.status).to.equal(200);
      await policyInForce(server);
      const secret = await confidentialClient(server, 'rollback-app', { scopes: ['read'] });
      expect((await clientCredentials(server, 'rollback-app', secret, { scope: 'read' })).status).to.equal(200);

      const refused = await server.admin('POST', `/policy-rules/${created.body.id}/history/1/rollback`);
      expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
      expect(refused.body.error_description).to.contain(`(rule ${guard})`).and.match(CONFLICT_AT);
      expect((await server.admin('GET', `/policy-rules/${created.body.id}`)).body.content).to.contain('unused');
      expect((await server.admin('GET', `/policy-rules/${created.body.id}/history`)).body).to.have.length(2);
    });

    it('answers 404 for an unknown record or version, and 400 for a `to` that names no version', async function () {
      expect((await server.admin('GET', '/policy-rules/999999/history')).status).to.equal(404);
      expect((await server.admin('GET', `/policy-rules/${id}/history/999`)).status).to.equal(404);
      expect((await server.admin('GET', `/policy-rules/${id}/history/abc`)).status).to.equal(404);
      const badTo = await server.admin('GET', `/policy-rules/${id}/history/9/diff?to=999`);
      expect(badTo.status).to.equal(400);
      expect(badTo.body.field).to.equal('to');
      expect((await server.admin('GET', `/policy-rules/${id}/history?tenantId=other-tenant`)).status).to.equal(404);
    });
  });
});
