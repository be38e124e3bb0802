import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { clientCredentials, confidentialClient, eventually, policyInForce } from '../support/oauth.js';
import { inTenant, readyServer, type TestServer } from '../support/server.js';
import { AUDIT_LOG_COLLECTION, AuditLog, type AuditEntry, type RecordedDecisionCursor } from '../../src/audit/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

/** An audit entry of a decision, as the audit middleware writes one (for the paging test). */
const SAMPLE_ENTRY = {
  endpoint: '/token',
  method: 'POST',
  requestSummary: {},
  outcome: 'allow' as const,
  tenantId: 'impact-paging',
  clientId: 'paged',
  subjectId: null,
  ip: null,
  userAgent: null,
  requestId: null,
};

const TOKEN_RULE = 'arbiter/token/token.rego';
const PACK_TOKEN_RULE = readFileSync(new URL('../../policies/arbiter/token/token.rego', import.meta.url), 'utf8');
/** The pack's token rule, with the scope "write" never granted to a client_credentials token. */
const WITHOUT_WRITE = PACK_TOKEN_RULE.replace(
  'machine_scopes := lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes',
  'machine_scopes := (lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes) - {"write"}',
);
/** A second complete definition of the token decision: it compiles, and cannot decide (issue 24's reproduction). */
const CONFLICT = 'package arbiter.token\n\ndecision := {"allow": true}\n';

const rego = (path: string, content: string) => ({ version: null, kind: 'rego', path, content });
const dropWrite = { collection: 'policy-rules', op: 'replace', record: rego(TOKEN_RULE, WITHOUT_WRITE) };

/**
 * Knowing a policy change before it is in force (issue 25): POST /admin/api/policy-impact replays
 * a tenant's recorded decisions against the bundle a proposed change makes, without changing
 * anything; a shadow rule is evaluated against every live decision, decides none, and is
 * promoted in one call. Real HTTP, real OPA, real recorded traffic.
 */
describe('Policy impact analysis and shadow policies', function () {
  let server: TestServer;
  let tenantA: TestServer;
  let tenantB: TestServer;
  const secrets: Record<string, string> = {};

  /** Audit ids of the /token requests made by `make`, newest first, as the audit log lists them in `tenant`. */
  async function tokenEntries(tenant: TestServer, clientId: string): Promise<{ id: number; scopes: string[] }[]> {
    const page = await tenant.admin('GET', `/audit-logs?endpoint=/token&clientId=${clientId}&size=1000`);
    return (page.body.content as any[]).map((entry) => ({ id: entry.id, scopes: entry.policyInput.request.scopes }));
  }

  async function traffic(tenant: TestServer, name: string): Promise<void> {
    const headers = { 'X-Tenant-Id': name };
    for (const [clientId, scope] of [
      ['reader', 'read'],
      ['writer', 'read write'],
      ['writer', 'read'],
      ['writer', 'read write'],
      ['reader', 'read'],
      ['writer', 'write'],
    ] as const) {
      const answer = await clientCredentials(tenant, clientId, secrets[`${name} ${clientId}`]!, { scope }, headers);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    }
    // Every entry is written before its answer goes out: the traffic is all in the audit log now.
  }

  const impact = (tenant: TestServer, body: unknown) => tenant.admin('POST', '/policy-impact', body);
  const storeRevision = async () =>
    ((await (await server.request('/healthz')).json()) as any).policyRevision.store as string;

  before(async function () {
    // Its own server: shadows and promotions change the shared bundle.
    server = await readyServer();
    tenantA = inTenant(server, 'impact-a');
    tenantB = inTenant(server, 'impact-b');
    for (const [tenant, name] of [
      [tenantA, 'impact-a'],
      [tenantB, 'impact-b'],
    ] as const) {
      secrets[`${name} reader`] = await confidentialClient(tenant, 'reader', { scopes: ['read'] }, name);
      secrets[`${name} writer`] = await confidentialClient(tenant, 'writer', { scopes: ['read', 'write'] }, name);
    }
    await traffic(tenantA, 'impact-a');
    await traffic(tenantB, 'impact-b');
  });
  after(async function () {
    await server?.close();
  });

  describe('POST /admin/api/policy-impact', function () {
    it('shows exactly the recorded decisions that granted the scope a rule drops, as narrower, and changes nothing', async function () {
      const revision = await storeRevision();
      const answer = await impact(tenantA, { changes: [dropWrite] });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      const writes = (await tokenEntries(tenantA, 'writer')).filter((entry) => entry.scopes.includes('write'));
      const narrowed = writes.filter((entry) => entry.scopes.includes('read'));
      const refused = writes.filter((entry) => !entry.scopes.includes('read'));
      expect(answer.body.replayed).to.equal(6);
      expect(answer.body.changed.map((change: any) => change.auditId)).to.have.members(writes.map((entry) => entry.id));
      for (const change of answer.body.changed) {
        const narrower = narrowed.some((entry) => entry.id === change.auditId);
        expect(change).to.include({
          point: 'token',
          clientId: 'writer',
          kind: narrower ? 'narrower' : 'allow_to_deny',
        });
        expect(change.before).to.deep.include({ allow: true });
        if (narrower) {
          expect(change.before.scopes).to.deep.equal(['read', 'write']);
          expect(change.after).to.deep.include({ allow: true, scopes: ['read'] });
        } else expect(change.after).to.include({ allow: false, error: 'invalid_scope' });
        expect(Date.parse(change.time)).to.be.a('number').and.not.NaN;
      }
      expect(refused).to.have.length(1);
      expect(answer.body.summary.byPoint.token).to.include({ replayed: 6, changed: 3, narrower: 2, allow_to_deny: 1 });
      expect(answer.body.summary.byClient.writer).to.include({ replayed: 4, changed: 3, narrower: 2 });
      expect(answer.body.summary.byClient.reader).to.include({ replayed: 2, changed: 0 });
      // Nothing in force changed: the store's revision, the rule, the live answer.
      expect(await storeRevision()).to.equal(revision);
      const live = await clientCredentials(
        tenantA,
        'writer',
        secrets['impact-a writer']!,
        { scope: 'read write' },
        {
          'X-Tenant-Id': 'impact-a',
        },
      );
      expect(live.body.scope).to.equal('read write');
    });

    it("shows exactly one client's allows as allow_to_deny when a data change withholds every scope from it", async function () {
      const oauth = ((await server.admin('GET', '/policy-data?bundledOnly=true')).body as any[]).find(
        (entry) => entry.dataKey === 'oauth',
      );
      const data = JSON.parse(oauth.payload);
      data.clients = { reader: { withheld_scopes: ['read'] } };
      const answer = await impact(tenantA, {
        changes: [
          { collection: 'policy-data', op: 'replace', record: { dataKey: 'oauth', payload: JSON.stringify(data) } },
        ],
      });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      const readerEntries = await tokenEntries(tenantA, 'reader');
      expect(readerEntries).to.have.length.greaterThan(1);
      expect(answer.body.changed.map((change: any) => change.auditId)).to.have.members(
        readerEntries.map((entry) => entry.id),
      );
      expect(
        answer.body.changed.every((change: any) => change.kind === 'allow_to_deny' && change.clientId === 'reader'),
      ).to.be.true;
      expect(answer.body.summary.byClient).to.have.keys('reader', 'writer');
      expect(answer.body.summary.byClient.writer.changed).to.equal(0);
    });

    it('counts a client named __proto__ under its name, and nowhere else (not in the prototype every object shares)', async function () {
      const tenant = inTenant(server, 'impact-proto');
      const secret = await confidentialClient(tenant, '__proto__', { scopes: ['read', 'write'] }, 'impact-proto');
      const token = await clientCredentials(
        tenant,
        '__proto__',
        secret,
        { scope: 'read write' },
        {
          'X-Tenant-Id': 'impact-proto',
        },
      );
      expect(token.status, JSON.stringify(token.body)).to.equal(200);
      const answer = await impact(tenant, { changes: [dropWrite] });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      expect(Object.keys(answer.body.summary.byClient)).to.deep.equal(['__proto__']);
      expect(answer.body.summary.byClient.__proto__).to.include({ replayed: 1, changed: 1, narrower: 1 });
      // The server runs in this process: its objects are this test's.
      expect(({} as Record<string, unknown>).replayed).to.equal(undefined);
      expect(({} as Record<string, unknown>).changed).to.equal(undefined);
    });

    it("never replays or shows another tenant's decisions", async function () {
      const [a, b] = await Promise.all([
        impact(tenantA, { changes: [dropWrite] }),
        impact(tenantB, { changes: [dropWrite] }),
      ]);
      const idsOf = async (tenant: TestServer) => [
        ...(await tokenEntries(tenant, 'writer')).map((entry) => entry.id),
        ...(await tokenEntries(tenant, 'reader')).map((entry) => entry.id),
      ];
      const [aIds, bIds] = [await idsOf(tenantA), await idsOf(tenantB)];
      expect(a.body.changed.map((change: any) => change.auditId).every((id: number) => aIds.includes(id))).to.be.true;
      expect(b.body.changed.map((change: any) => change.auditId).every((id: number) => bIds.includes(id))).to.be.true;
      expect(b.body.changed).to.have.length(3);
      // The default tenant made no /token request: nothing of A's or B's is replayed there.
      const byDefault = await impact(server, { changes: [dropWrite], filter: { point: 'token' } });
      expect(byDefault.body).to.include({ replayed: 0 });
      expect(byDefault.body.changed).to.deep.equal([]);
    });

    it('replays the most recent `limit` decisions, of one point, client and time range', async function () {
      const newest = await impact(tenantA, { changes: [dropWrite], limit: 2, filter: { point: 'token' } });
      expect(newest.body.replayed).to.equal(2);
      const ofReader = await impact(tenantA, { changes: [dropWrite], filter: { clientId: 'reader' } });
      expect(ofReader.body).to.include({ replayed: (await tokenEntries(tenantA, 'reader')).length });
      expect(ofReader.body.changed).to.deep.equal([]);
      const future = new Date(Date.now() + 3_600_000).toISOString();
      expect((await impact(tenantA, { changes: [dropWrite], filter: { from: future } })).body.replayed).to.equal(0);
      const past = await impact(tenantA, {
        changes: [dropWrite],
        filter: { to: future, from: '2020-01-01T00:00:00Z' },
      });
      expect(past.body.replayed).to.be.greaterThan(5);
      const otherPoint = await impact(tenantA, { changes: [dropWrite], filter: { point: 'authorize' } });
      expect(otherPoint.body.replayed).to.equal(0);
    });

    it('refuses a bundle that fails validation with the 400 the write would give, and stores nothing', async function () {
      const revision = await storeRevision();
      const change = rego('arbiter/impact_conflict.rego', CONFLICT);
      const [tried, written] = [
        await impact(tenantA, { changes: [{ collection: 'policy-rules', op: 'create', record: change }] }),
        await server.admin('POST', '/policy-rules/validate', change),
      ];
      expect(written.status).to.equal(400);
      expect(tried.status, JSON.stringify(tried.body)).to.equal(400);
      expect(tried.body).to.deep.include({
        error: 'invalid_request',
        field: 'content',
        error_description: written.body.error_description,
      });
      expect(tried.body.error_description).to.contain('eval_conflict_error');
      expect(await storeRevision()).to.equal(revision);
      const rules = (await server.admin('GET', '/policy-rules?limit=1000')).body as any[];
      expect(rules.map((rule) => rule.path)).not.to.include('arbiter/impact_conflict.rego');
    });

    it("refuses each change as its write would, saying which change: schema, file check, unknown record, tenant's record, shadow", async function () {
      const refusal = (change: unknown) => impact(tenantA, { changes: [change] });
      const unknownField = await refusal({
        collection: 'policy-rules',
        op: 'create',
        record: { ...rego('a/b.rego', 'package a.b\n'), colour: 1 },
      });
      expect(unknownField.status).to.equal(400);
      expect(unknownField.body).to.include({ field: 'colour', change: 0 });
      const badRego = await impact(tenantA, {
        changes: [
          dropWrite,
          {
            collection: 'policy-rules',
            op: 'create',
            record: rego('arbiter/bad.rego', 'package arbiter.bad\n\nx := \n'),
          },
        ],
      });
      expect(badRego.status).to.equal(400);
      const written = await server.admin(
        'POST',
        '/policy-rules/validate',
        rego('arbiter/bad.rego', 'package arbiter.bad\n\nx := \n'),
      );
      expect(badRego.body).to.include({
        change: 1,
        field: 'content',
        error_description: written.body.error_description,
      });
      const missing = await refusal({
        collection: 'policy-rules',
        op: 'replace',
        id: 999999,
        record: rego('x/y.rego', 'package x.y\n'),
      });
      expect(missing.status).to.equal(404);
      expect(missing.body.change).to.equal(0);
      const taken = await refusal({
        collection: 'policy-rules',
        op: 'create',
        record: rego(TOKEN_RULE, WITHOUT_WRITE),
      });
      expect(taken.status).to.equal(409);
      const tenants = await refusal({
        collection: 'policy-data',
        op: 'create',
        record: { dataKey: 'x', payload: '{}', tenantId: 'impact-a' },
      });
      expect(tenants.status).to.equal(400);
      expect(tenants.body.field).to.equal('tenantId');
      const shadow = await refusal({ ...dropWrite, record: { ...dropWrite.record, mode: 'shadow' } });
      expect(shadow.body.field).to.equal('mode');
      const unnamed = await refusal({ collection: 'policy-rules', op: 'delete' });
      expect(unnamed.status).to.equal(400);
      const tooMany = await impact(tenantA, { changes: [dropWrite], limit: 100_001 });
      expect(tooMany.status).to.equal(400);
      expect(tooMany.body.field).to.equal('limit');
      const backwards = await impact(tenantA, {
        changes: [dropWrite],
        filter: { from: '2030-01-01T00:00:00Z', to: '2020-01-01T00:00:00Z' },
      });
      expect(backwards.body.field).to.equal('filter.from');
    });

    it('tries several changes as one bundle: a rule and the data it reads, and a deletion', async function () {
      const rule =
        'package arbiter.impact_extra\n\nimport data.impact_settings\n\nblocked contains client if some client in impact_settings.blocked\n';
      const answer = await impact(tenantA, {
        changes: [
          {
            collection: 'policy-data',
            op: 'create',
            record: { dataKey: 'impact_settings', payload: '{"blocked":["writer"]}' },
          },
          { collection: 'policy-rules', op: 'create', record: rego('arbiter/impact_extra.rego', rule) },
          {
            collection: 'policy-rules',
            op: 'replace',
            record: rego(
              TOKEN_RULE,
              PACK_TOKEN_RULE.replace(
                'decision := lib.details_denial(unknown_details) if {',
                'decision := lib.deny("access_denied", "blocked") if {\n\tinput.client.client_id in data.arbiter.impact_extra.blocked\n} else := lib.details_denial(unknown_details) if {',
              ),
            ),
          },
        ],
      });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      const writer = answer.body.summary.byClient.writer;
      expect(writer.replayed).to.equal((await tokenEntries(tenantA, 'writer')).length);
      expect(writer.allow_to_deny).to.equal(writer.replayed);
      expect(answer.body.summary.byClient.reader.changed).to.equal(0);
      const deleting = await impact(tenantA, {
        changes: [{ collection: 'policy-data', op: 'delete', record: { dataKey: 'oauth' } }],
      });
      expect(deleting.status, JSON.stringify(deleting.body)).to.equal(200);
    });
  });

  describe("the overview's activity", function () {
    it("counts each tenant's decisions of the last hour per minute, point and outcome, and the most refused", async function () {
      const total = async (tenant: TestServer) => {
        const activity = (await tenant.admin('GET', '/activity')).body;
        expect(activity.minutes).to.have.length(60);
        return activity.minutes.reduce(
          (sum: number, minute: any) => sum + (minute.byPoint.token?.allow ?? 0) + (minute.byPoint.token?.deny ?? 0),
          0,
        );
      };
      const [a, b] = [await total(tenantA), await total(tenantB)];
      expect(a).to.equal(
        (await tokenEntries(tenantA, 'writer')).length + (await tokenEntries(tenantA, 'reader')).length,
      );
      expect(b).to.equal(6);
      const refused = await clientCredentials(
        tenantB,
        'reader',
        secrets['impact-b reader']!,
        { scope: 'write' },
        {
          'X-Tenant-Id': 'impact-b',
        },
      );
      expect(refused.status).to.equal(400);
      const activity = (await tenantB.admin('GET', '/activity?minutes=5')).body;
      expect(activity.minutes).to.have.length(5);
      expect(activity.deniedClients).to.deep.equal([{ clientId: 'reader', denials: 1, decisions: 3 }]);
      expect(activity.deniedPoints).to.deep.equal([{ point: 'token', denials: 1, decisions: 7 }]);
      expect((await tenantA.admin('GET', '/activity')).body.deniedClients).to.deep.equal([]);
    });
  });

  describe('the engines that decide', function () {
    it('leave to OPA (opa eval of the candidate) what the compiled module cannot decide, as live', async function () {
      // time.parse_rfc3339_ns is a builtin only OPA has: these decisions cannot be made in process.
      const content = PACK_TOKEN_RULE.replace(
        'decision := lib.details_denial(unknown_details) if {',
        'decision := lib.deny("access_denied", "not before 2020") if {\n\tinput.client.client_id == "writer"\n\ttime.parse_rfc3339_ns(input.time) > time.parse_rfc3339_ns("2020-01-01T00:00:00Z")\n} else := lib.details_denial(unknown_details) if {',
      );
      const answer = await impact(tenantA, {
        changes: [{ collection: 'policy-rules', op: 'replace', record: rego(TOKEN_RULE, content) }],
      });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      const { writer, reader } = answer.body.summary.byClient;
      expect(writer.allow_to_deny).to.equal(writer.replayed);
      expect(reader.changed).to.equal(0);
      const refused = answer.body.changed.find((change: any) => change.clientId === 'writer');
      expect(refused.after).to.deep.include({
        allow: false,
        error: 'access_denied',
        error_description: 'not before 2020',
      });
    });
  });

  describe('the recorded decisions replayed', function () {
    it('are read newest first by keyset pages, each once, however many share an instant', async function () {
      const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
      const times = ['2026-01-01T00:00:03.000Z', '2026-01-01T00:00:02.000Z', '2026-01-01T00:00:01.000Z'];
      const made = Array.from({ length: 700 }, (_, index) => ({
        ...SAMPLE_ENTRY,
        id: 800_000_000 + index,
        createdAt: times[index < 300 ? 0 : index < 650 ? 1 : 2]!,
        policyDecision: { allow: true, point: 'token' },
        policyInput: { index },
      }));
      await entries.insertMany(made);
      const read: number[] = [];
      for await (const page of new AuditLog(server.store).recordedDecisions({ tenantId: 'impact-paging', limit: 1000 }))
        read.push(...page.map((decision) => decision.auditId));
      expect(read).to.have.length(700);
      expect(new Set(read).size).to.equal(700);
      const position = (id: number) => read.indexOf(id);
      expect(position(800_000_000)).to.be.lessThan(position(800_000_300));
      expect(position(800_000_300)).to.be.lessThan(position(800_000_650));
      const window: number[] = [];
      for await (const page of new AuditLog(server.store).recordedDecisions({
        tenantId: 'impact-paging',
        limit: 1000,
        from: times[1],
        to: times[0],
      }))
        window.push(...page.map((decision) => decision.auditId));
      expect(window.sort()).to.deep.equal(made.slice(300, 650).map((entry) => entry.id));
    });
  });

  describe('impact analysis beyond one call', function () {
    it('resumes where a read stopped at its limit, within an entry of several decisions too, each decision once', async function () {
      const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
      const instant = '2026-02-01T00:00:01.000Z';
      // 40 entries at one instant, each of two decisions: a limit of 7 stops within entries, and within the instant.
      await entries.insertMany(
        Array.from({ length: 40 }, (_, index) => ({
          ...SAMPLE_ENTRY,
          tenantId: 'impact-resume',
          id: 810_000_000 + index,
          createdAt: instant,
          policyDecision: [
            { allow: true, point: 'token' },
            { allow: true, point: 'token' },
          ],
          policyInput: [{ index }, { index, second: true }],
        })),
      );
      const audit = new AuditLog(server.store);
      const whole: string[] = [];
      for await (const page of audit.recordedDecisions({ tenantId: 'impact-resume', limit: 1000 }))
        whole.push(...page.map((decision) => `${decision.auditId}/${decision.index}`));
      expect(whole).to.have.length(80);
      const resumed: string[] = [];
      let cursor: RecordedDecisionCursor | undefined;
      for (let call = 0; call < 20; call++) {
        const pages = audit.recordedDecisions({ tenantId: 'impact-resume', limit: 7 }, cursor);
        for await (const page of pages)
          resumed.push(...page.map((decision) => `${decision.auditId}/${decision.index}`));
        if (!pages.stoppedAt) break;
        cursor = pages.stoppedAt;
      }
      expect(resumed).to.deep.equal(whole);
    });

    it('answers a nextCursor while decisions are left, and replays the next ones with it', async function () {
      const first = await impact(tenantA, { changes: [dropWrite], limit: 4 });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.replayed).to.equal(4);
      expect(first.body.nextCursor).to.be.a('string');
      const rest = await impact(tenantA, { changes: [dropWrite], limit: 1000, cursor: first.body.nextCursor });
      expect(rest.status, JSON.stringify(rest.body)).to.equal(200);
      expect(rest.body.nextCursor).to.equal(null);
      const all = await impact(tenantA, { changes: [dropWrite], limit: 1000 });
      expect(first.body.replayed + rest.body.replayed).to.equal(all.body.replayed);
      // Each decision once across the calls (the first takes the latest of every client first, so the order differs).
      const ids = (answer: any) => answer.body.changed.map((change: any) => change.auditId);
      expect([...ids(first), ...ids(rest)].sort()).to.deep.equal([...ids(all)].sort());
      const refused = await impact(tenantA, { changes: [dropWrite], cursor: 'not-a-cursor' });
      expect(refused.status).to.equal(400);
      // Entries to skip one by one beyond what any page holds (found 2026-11-30).
      const forged = JSON.parse(Buffer.from(first.body.nextCursor, 'base64url').toString('utf8'));
      const skipsTooMany = Buffer.from(JSON.stringify({ ...forged, seen: 10_001 })).toString('base64url');
      expect((await impact(tenantA, { changes: [dropWrite], cursor: skipsTooMany })).status).to.equal(400);
    });
  });

  describe('shadow policies', function () {
    let shadowId: number;
    let predicted: any[];

    it('keep a shadow rule beside the live one of its path, and change no live outcome', async function () {
      const revision = await storeRevision();
      const created = await server.admin('POST', '/policy-rules', {
        ...rego(TOKEN_RULE, WITHOUT_WRITE),
        mode: 'shadow',
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(created.body).to.include({ mode: 'shadow', path: TOKEN_RULE });
      shadowId = created.body.id;
      const atPath = ((await server.admin('GET', '/policy-rules?limit=1000')).body as any[]).filter(
        (rule) => rule.path === TOKEN_RULE,
      );
      expect(atPath.map((rule) => rule.mode ?? 'live').sort()).to.deep.equal(['live', 'shadow']);
      const searched = (await server.admin('GET', `/policy-rules?q=${encodeURIComponent(TOKEN_RULE)}`)).body as any[];
      expect(searched.map((rule) => rule.mode ?? 'live').sort()).to.deep.equal(['live', 'shadow']);
      expect(await storeRevision()).to.equal(revision);
      const status = await server.admin('GET', '/policy-shadow');
      expect(status.body).to.include({ active: true, liveRevision: revision });
      expect(status.body.records).to.deep.equal([
        { collection: 'policy-rules', id: shadowId, path: TOKEN_RULE, enabled: true },
      ]);
      // A second shadow of one path is a conflict, as a second live rule would be.
      const twice = await server.admin('POST', '/policy-rules', { ...rego(TOKEN_RULE, WITHOUT_WRITE), mode: 'shadow' });
      expect(twice.status).to.equal(409);
    });

    it('counts and lists the differences of live traffic, exactly those impact analysis predicted for it', async function () {
      const mark = new Date().toISOString();
      await traffic(tenantA, 'impact-a');
      await traffic(tenantB, 'impact-b');
      const prediction = await impact(tenantA, { changes: [dropWrite], filter: { from: mark } });
      predicted = prediction.body.changed;
      // The candidate impact analysis tried is the shadow's candidate revision, byte for byte.
      expect(prediction.body.revisions.candidate).to.equal(
        (await server.admin('GET', '/policy-shadow')).body.candidateRevision,
      );
      expect(predicted).to.have.length(3);
      // Every live answer was the live policy's: "write" granted.
      const entries = await tokenEntries(tenantA, 'writer');
      const fresh = entries.filter((entry) => predicted.some((change) => change.auditId === entry.id));
      expect(fresh).to.have.length(3);
      let listed: any = null;
      await eventually(async () => {
        listed = (await tenantA.admin('GET', '/policy-shadow/differences')).body;
        return listed.differences.filter((difference: any) => difference.time >= mark).length >= 3;
      });
      const shadowed = listed.differences.filter((difference: any) => difference.time >= mark);
      const withoutTenant = ({ tenantId, ...change }: any) => (expect(tenantId).to.equal('impact-a'), change);
      expect(shadowed.map(withoutTenant)).to.have.deep.members(predicted);
      expect(listed.active).to.equal(true);
      const metrics = await (await server.request('/metrics')).text();
      const counted = /arbiter_policy_shadow_differences_total\{point="token",kind="narrower"\} (\d+)/.exec(metrics);
      expect(Number(counted?.[1])).to.be.at.least(2);
      // Another tenant's differences are its own, and never listed with these.
      let ofB: any = null;
      await eventually(async () => {
        ofB = (await tenantB.admin('GET', '/policy-shadow/differences')).body;
        return ofB.differences.length >= 3;
      });
      expect(ofB.differences).to.have.length(3);
      expect(ofB.differences.every((difference: any) => difference.tenantId === 'impact-b')).to.equal(true);
      const aIds = new Set(shadowed.map((difference: any) => difference.auditId));
      expect(ofB.differences.some((difference: any) => aIds.has(difference.auditId))).to.equal(false);
      const ofA = (await tenantA.admin('GET', '/policy-shadow/differences')).body;
      expect(ofA.differences.every((difference: any) => difference.tenantId === 'impact-a')).to.equal(true);
      expect(ofA.differences.filter((difference: any) => difference.time >= mark)).to.have.length(3);
    });

    it('lives once promoted in one call, and the shadow is gone', async function () {
      const promoted = await server.admin('POST', '/policy-shadow/promote');
      expect(promoted.status, JSON.stringify(promoted.body)).to.equal(200);
      expect(promoted.body.promoted).to.deep.equal([
        { collection: 'policy-rules', path: TOKEN_RULE, id: promoted.body.promoted[0].id, action: 'replaced' },
      ]);
      await policyInForce(server);
      const live = await clientCredentials(
        tenantA,
        'writer',
        secrets['impact-a writer']!,
        { scope: 'read write' },
        {
          'X-Tenant-Id': 'impact-a',
        },
      );
      expect(live.body.scope).to.equal('read');
      const atPath = ((await server.admin('GET', '/policy-rules?limit=1000')).body as any[]).filter(
        (rule) => rule.path === TOKEN_RULE,
      );
      expect(atPath).to.have.length(1);
      expect(atPath[0].mode).to.equal(undefined);
      expect(atPath[0].content).to.equal(WITHOUT_WRITE);
      expect((await server.admin('GET', `/policy-rules/${shadowId}`)).status).to.equal(404);
      expect((await server.admin('GET', '/policy-shadow')).body).to.include({ active: false });
      const history = (await server.admin('GET', `/policy-rules/${atPath[0].id}/history`)).body as any[];
      expect(history[0]).to.include({ action: 'replace' });
    });

    it('is refused as a write would be when its candidate cannot decide, and is removed by discarding', async function () {
      const broken = await server.admin('POST', '/policy-rules', {
        ...rego('arbiter/shadow_conflict.rego', CONFLICT),
        mode: 'shadow',
      });
      expect(broken.status).to.equal(400);
      expect(broken.body.error_description).to.contain('eval_conflict_error');
      const created = await server.admin('POST', '/policy-rules', {
        ...rego(TOKEN_RULE, PACK_TOKEN_RULE),
        mode: 'shadow',
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const replaced = await server.admin('PUT', `/policy-rules/${created.body.id}`, rego(TOKEN_RULE, PACK_TOKEN_RULE));
      expect(replaced.status).to.equal(200);
      expect(replaced.body.mode).to.equal('shadow');
      const turned = await server.admin('PUT', `/policy-rules/${created.body.id}`, {
        ...rego(TOKEN_RULE, PACK_TOKEN_RULE),
        mode: 'live',
      });
      expect(turned.status).to.equal(400);
      expect(turned.body.field).to.equal('mode');
      const discarded = await server.admin('POST', '/policy-shadow/discard');
      expect(discarded.body).to.deep.equal({ discarded: 1 });
      expect((await server.admin('GET', `/policy-rules/${created.body.id}`)).status).to.equal(404);
      expect((await server.admin('GET', '/policy-shadow')).body.records).to.deep.equal([]);
    });
  });
});
