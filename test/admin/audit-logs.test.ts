import { expect } from 'chai';
import { readyServer, type TestServer } from '../support/server.js';
import { type AuditEntry } from '../../src/audit/log.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

describe('Audit log', function () {
  let server: TestServer;

  before(async function () {
    // Its own server, so that counts are exact.
    server = await readyServer();
    for (let n = 0; n < 25; n++)
      await server.admin('POST', '/subjects', {
        subjectId: `audited-${n}`,
        ...(n % 5 === 0 ? { tenantId: 'tenant-x' } : {}),
      });
    await server.request('/token', {
      method: 'POST',
      headers: {
        Authorization: 'Basic ' + Buffer.from('nobody:secret-value').toString('base64'),
        'Content-Type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials&client_secret=also-secret',
    });
  });
  after(async function () {
    await server?.close();
  });

  it('pages with the spec fields and defaults (page 0, size 20, newest first)', async function () {
    const { status, body } = await server.admin('GET', '/audit-logs');
    expect(status).to.equal(200);
    expect(body).to.include.keys('content', 'totalElements', 'totalPages', 'number', 'size');
    expect(body.number).to.equal(0);
    expect(body.size).to.equal(20);
    expect(body.content).to.have.length(20);
    expect(body.totalElements, 'the default tenant: 20 writes, the token request, these reads').to.be.at.least(21);
    expect(body.totalPages).to.equal(Math.ceil(body.totalElements / 20));
    const ids = body.content.map((entry: any) => entry.id);
    expect(ids).to.deep.equal([...ids].sort((a, b) => b - a));
  });

  it('filters by endpoint, tenantId and clientId, and sorts by field,direction', async function () {
    const admin = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&size=100&sort=id,asc');
    expect(admin.body.totalElements, 'writes to the default tenant').to.equal(20);
    const everywhere = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&size=100&allTenants=true');
    expect(everywhere.body.totalElements, 'writes to every tenant').to.equal(25);
    const ids = admin.body.content.map((entry: any) => entry.id);
    expect(ids).to.deep.equal([...ids].sort((a, b) => a - b));
    const tenant = await server.admin('GET', '/audit-logs?tenantId=tenant-x&endpoint=/admin/api/subjects');
    expect(tenant.body.totalElements, 'writes aimed at tenant-x by their body').to.equal(5);
    for (const entry of tenant.body.content) expect(entry.tenantId).to.equal('tenant-x');
    const second = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&page=1&size=10');
    expect(second.body.content).to.have.length(10);
    expect(second.body.number).to.equal(1);
    const byClient = await server.admin('GET', '/audit-logs?clientId=nobody');
    expect(byClient.body.totalElements, 'the client named by a failed Basic authentication').to.equal(1);
    expect(byClient.body.content[0].clientId).to.equal('nobody');
  });

  it('pages with a cursor as with page numbers, forwards and backwards in time, at the same cost at any depth', async function () {
    const filter = 'endpoint=/admin/api/subjects&allTenants=true&size=7';
    for (const sort of ['id,desc', 'id,asc', 'createdAt,desc', 'createdAt,asc']) {
      const byNumber: number[] = [];
      for (let page = 0; page < 4; page++)
        byNumber.push(
          ...(await server.admin('GET', `/audit-logs?${filter}&sort=${sort}&page=${page}`)).body.content.map(
            (entry: any) => entry.id,
          ),
        );
      const byCursor: number[] = [];
      let cursor: string | null = '';
      let pages = 0;
      while (cursor !== null) {
        const { status, body } = await server.admin(
          'GET',
          `/audit-logs?${filter}&sort=${sort}&page=${pages}&cursor=${encodeURIComponent(cursor)}`,
        );
        expect(status).to.equal(200);
        expect(body.number).to.equal(pages++);
        byCursor.push(...body.content.map((entry: any) => entry.id));
        cursor = body.nextCursor;
      }
      expect(byCursor, sort).to.deep.equal(byNumber);
      expect(byCursor).to.have.length(25);
      expect(pages, 'the last page says there is none after it').to.equal(4);
    }
  });

  it('refuses a cursor it did not give with 400', async function () {
    // The last: entries to skip one by one beyond what any page holds (found 2026-11-30: a forged
    // one had SQLite step through the whole log, stalling the server).
    const skipsTooMany = Buffer.from(JSON.stringify([9_000_000, 10_001])).toString('base64url');
    for (const cursor of ['nonsense', Buffer.from('{"a":1}').toString('base64url'), 'x'.repeat(300), skipsTooMany]) {
      const { status, body } = await server.admin('GET', `/audit-logs?cursor=${cursor}`);
      expect(status, cursor).to.equal(400);
      expect(body.error).to.equal('invalid_request');
    }
  });

  it('counts up to 10,000 matches and says when more match, rather than count them all on every page', async function () {
    const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
    const endpoint = '/audit-logs-test/capped';
    for (let from = 0; from < 10_001; from += 1_000)
      await entries.insertMany(
        Array.from(
          { length: Math.min(1_000, 10_001 - from) },
          (_, n) =>
            ({
              id: 700_000_000 + from + n,
              createdAt: new Date().toISOString(),
              endpoint,
              method: 'GET',
              outcome: 'success',
              tenantId: null,
            }) as unknown as AuditEntry,
        ),
      );
    const { body } = await server.admin('GET', `/audit-logs?endpoint=${endpoint}&size=1000`);
    expect(body).to.include({ totalElements: 10_000, totalElementsCapped: true, totalPages: 10 });
    expect(body.content).to.have.length(1_000);
    expect(body.nextCursor).to.be.a('string');
    const exact = await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects');
    expect(exact.body).to.include({ totalElements: 20, totalElementsCapped: false });
  });

  it('records a token request with its facts but never its secrets', async function () {
    const { body } = await server.admin('GET', '/audit-logs?endpoint=/token');
    expect(body.totalElements).to.equal(1);
    const [entry] = body.content;
    expect(entry).to.include.keys(
      'id',
      'endpoint',
      'method',
      'requestSummary',
      'policyInput',
      'policyDecision',
      'outcome',
      'tenantId',
      'clientId',
      'subjectId',
      'ip',
      'userAgent',
      'createdAt',
    );
    expect(entry.method).to.equal('POST');
    expect(entry.outcome).to.equal('deny');
    expect(entry.requestSummary.authType).to.equal('basic');
    expect(entry.requestSummary.grant_type).to.equal('client_credentials');
    expect(new Date(entry.createdAt).toISOString()).to.equal(entry.createdAt);
    const text = JSON.stringify(entry);
    expect(text).not.to.contain('secret-value');
    expect(text).not.to.contain('also-secret');
    expect(text).not.to.contain(Buffer.from('nobody:secret-value').toString('base64'));
  });

  it('gets one entry by id, 404 for an unknown one, and offers no way to change entries', async function () {
    const { body } = await server.admin('GET', '/audit-logs?size=1');
    const [entry] = body.content;
    const one = await server.admin('GET', `/audit-logs/${entry.id}`);
    expect(one.status).to.equal(200);
    expect(one.body).to.deep.equal(entry);
    expect((await server.admin('GET', '/audit-logs/99999999')).status).to.equal(404);
    expect((await server.admin('GET', '/audit-logs/abc')).status).to.equal(404);
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const path = method === 'POST' ? '/audit-logs' : `/audit-logs/${entry.id}`;
      const response = await server.admin(method, path, method === 'DELETE' ? undefined : { outcome: 'allow' });
      expect(response.status, method).to.be.oneOf([404, 405]);
    }
    expect((await server.admin('GET', `/audit-logs/${entry.id}`)).body).to.deep.equal(entry);
  });

  it('records refused Admin writes with the status and outcome the caller got', async function () {
    expect((await server.admin('POST', '/subjects', { subjectId: 'audited-1' })).status).to.equal(409);
    expect((await server.admin('POST', '/subjects', { subjectId: 42 })).status).to.equal(400);
    const unauthorized = await server.request('/admin/api/subjects', { method: 'POST', json: { subjectId: 'x' } });
    expect(unauthorized.status).to.equal(401);
    const [noKey, badBody, conflict] = (
      await server.admin('GET', '/audit-logs?endpoint=/admin/api/subjects&size=3&sort=id,desc')
    ).body.content;
    expect(conflict).to.deep.include({ outcome: 'deny' });
    expect(conflict.requestSummary).to.include({ status: 409, error: 'conflict' });
    expect(badBody.requestSummary).to.include({ status: 400, error: 'invalid_request' });
    expect(noKey.requestSummary).to.include({ status: 401 });
    expect(noKey.outcome).to.equal('deny');
  });

  it('filters by outcome (allow, deny, error), and refuses any other with 400', async function () {
    const denied = await server.admin('GET', '/audit-logs?outcome=deny&endpoint=/token');
    expect(denied.body.totalElements, 'the refused token request').to.equal(1);
    expect(denied.body.content[0].outcome).to.equal('deny');
    const allowed = await server.admin('GET', '/audit-logs?outcome=allow&endpoint=/admin/api/subjects');
    expect(allowed.body.totalElements).to.equal(20);
    expect((await server.admin('GET', '/audit-logs?outcome=allow&endpoint=/token')).body.totalElements).to.equal(0);
    const wrong = await server.admin('GET', '/audit-logs?outcome=maybe');
    expect(wrong.status).to.equal(400);
    expect(wrong.body.error_description).to.match(/outcome must be one of allow, deny, error/);
  });

  it('refuses a bad page, size or sort with 400', async function () {
    expect((await server.admin('GET', '/audit-logs?page=-1')).status).to.equal(400);
    expect((await server.admin('GET', '/audit-logs?size=0')).status).to.equal(400);
    expect((await server.admin('GET', '/audit-logs?sort=password,asc')).status).to.equal(400);
    expect((await server.admin('GET', '/audit-logs?sort=id,sideways')).status).to.equal(400);
    for (const field of ['subjectId', 'endpoint', 'clientId', 'method', 'outcome', 'tenantId']) {
      const unindexed = await server.admin('GET', `/audit-logs?sort=${field},asc`);
      expect(unindexed.status, field).to.equal(400);
      expect(unindexed.body).to.include({ field: 'sort' });
    }
  });

  it('numbers pages within the first 10,000 entries, and goes deeper by cursor only', async function () {
    expect((await server.admin('GET', '/audit-logs?page=499&size=20')).status).to.equal(200);
    for (const [page, size] of [
      [500, 20],
      [10, 1000],
      [9007199254740991, 1000],
    ]) {
      const deep = await server.admin('GET', `/audit-logs?page=${page}&size=${size}`);
      expect(deep.status, `page ${page} of ${size}`).to.equal(400);
      expect(deep.body).to.include({ error: 'invalid_request', field: 'page' });
      expect(deep.body.error_description).to.contain('10000').and.contain('cursor');
    }
    const first = await server.admin('GET', '/audit-logs?size=1');
    const next = await server.admin(
      'GET',
      `/audit-logs?page=20000&size=1&cursor=${encodeURIComponent(first.body.nextCursor)}`,
    );
    expect(next.status, 'a cursor goes on whatever the page number says').to.equal(200);
  });

  // Found 2026-11-29: an Admin call's entry took the client_id the caller put in the query or body.
  it("keeps at most 100 parameter names of any caller's request (found 2026-11-30: a read-only key's 40,000 made a 640 KB entry)", async function () {
    const made = await server.admin('POST', '/api-keys', { name: 'audit-reader', role: 'read-only' });
    const body = Object.fromEntries(Array.from({ length: 5000 }, (_, at) => [`field-${at}`, 0]));
    const refused = await server.request('/admin/api/clients/validate', {
      method: 'POST',
      key: made.body.key,
      json: body,
    });
    expect(refused.status).to.be.within(400, 499);
    const { body: page } = await server.admin('GET', '/audit-logs?endpoint=/admin/api/clients/validate&size=1');
    const names: string[] = page.content[0].requestSummary.parameterNames;
    expect(names).to.have.length(101);
    expect(names.at(-1)).to.equal('… 4900 more');
  });

  it('files an Admin write of a client under that client, whatever client_id the caller adds', async function () {
    const made = await server.admin('POST', '/clients?client_id=decoy', {
      clientId: 'audited-victim',
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: ['https://app.example/cb'],
      scopes: ['openid'],
      client_id: undefined,
    });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    expect((await server.admin('DELETE', '/clients/audited-victim?client_id=decoy')).status).to.equal(204);
    const filed = await server.admin('GET', '/audit-logs?clientId=audited-victim&sort=id,asc');
    expect(filed.body.content.map((entry: any) => entry.method)).to.deep.equal(['POST', 'DELETE']);
    expect((await server.admin('GET', '/audit-logs?clientId=decoy')).body.totalElements).to.equal(0);
  });
});
