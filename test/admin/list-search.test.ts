import { expect } from 'chai';
import { rawRequest } from '../support/raw-http.js';
import { ADMIN_KEY, inTenant, withServer, type TestServer } from '../support/server.js';
import { subjectsCollection } from '../../src/oauth/userinfo/accounts.js';

/**
 * Every Admin API list answers a total (X-Total-Count) and takes `q`, a case-insensitive substring
 * of the collection's key and name fields, every character as itself: through real HTTP, with
 * hostile values (huge, control characters, regex and LIKE metacharacters, bad paging).
 */
describe('Admin API lists: total and search', function () {
  let server: TestServer;
  const tenant = `search-${Math.random().toString(36).slice(2, 8)}`;
  const CLIENTS = [
    { clientId: 'payroll-web', clientName: 'Payroll (web)', clientType: 'public' },
    { clientId: 'payroll-batch', clientName: 'Nightly batch', clientType: 'confidential', clientSecret: 's3cret-1' },
    { clientId: 'wiki', clientName: 'Wiki 50% [beta].*', clientType: 'public' },
    { clientId: 'a_b', clientName: 'Underscore', clientType: 'public' },
    { clientId: 'ab', clientName: 'Plain', clientType: 'public' },
  ];

  before(async function () {
    server = inTenant(await withServer(), tenant);
    for (const client of CLIENTS) {
      const created = await server.admin('POST', '/clients', client);
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
  });

  async function list(
    query: string,
  ): Promise<{ status: number; ids: string[]; total: string | null; next: string | null; body: any }> {
    const response = await server.request(`/admin/api/clients?${query}`, { admin: true });
    const body = await response.json();
    return {
      status: response.status,
      body,
      ids: Array.isArray(body) ? body.map((client: { clientId: string }) => client.clientId) : [],
      total: response.headers.get('x-total-count'),
      next: /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1] ?? null,
    };
  }

  it('answers the total of every list in X-Total-Count, whatever the page', async function () {
    const all = await list('');
    expect(all.total).to.equal('5');
    expect(all.next).to.equal(null);
    const first = await list('limit=2');
    expect(first.ids).to.have.length(2);
    expect(first.total).to.equal('5');
    expect(first.next).to.equal('/admin/api/clients?limit=2&offset=2');
    const beyond = await list('offset=10');
    expect(beyond.ids).to.deep.equal([]);
    expect(beyond.total).to.equal('5');
  });

  it('counts up to 10,000 matches: beyond, X-Total-Count says 10,000 and X-Total-Count-Capped true, and Link pages on', async function () {
    // A count reads every match: repeated on a large collection it held SQLite's thread (165 ms at 300,000).
    const many = `many-${tenant}`;
    const now = new Date().toISOString();
    await subjectsCollection(server.store, many).insertMany(
      Array.from({ length: 10_050 }, (_, n) => ({
        id: n + 1,
        tenantId: many,
        subjectId: `bulk-${n}`,
        createdAt: now,
        updatedAt: now,
      })),
    );
    const page = await server.request('/admin/api/subjects?limit=20&offset=10020', {
      admin: true,
      headers: { 'X-Tenant-Id': many },
    });
    expect(page.status).to.equal(200);
    expect(page.headers.get('x-total-count')).to.equal('10000');
    expect(page.headers.get('x-total-count-capped')).to.equal('true');
    expect(((await page.json()) as unknown[]).length).to.equal(20);
    expect(page.headers.get('link')).to.contain('offset=10040');
    const few = await server.request('/admin/api/subjects?q=bulk-1004', {
      admin: true,
      headers: { 'X-Tenant-Id': many },
    });
    expect(few.headers.get('x-total-count')).to.equal('11');
    expect(few.headers.get('x-total-count-capped')).to.equal(null);
  });

  it('answers with Cache-Control: no-store, secrets shown once included (an initial access token, a new client secret)', async function () {
    const token = await server.request('/admin/api/initial-access-tokens', {
      method: 'POST',
      admin: true,
      json: { name: `no-store ${tenant}`, uses: 1 },
    });
    expect(token.status).to.equal(201);
    expect(token.headers.get('cache-control')).to.equal('no-store');
    const secret = await server.request('/admin/api/clients/payroll-batch/secret', { method: 'POST', admin: true });
    expect(secret.status).to.equal(200);
    expect(secret.headers.get('cache-control')).to.equal('no-store');
    const listed = await server.request('/admin/api/clients', { admin: true });
    expect(listed.headers.get('cache-control')).to.equal('no-store');
  });

  it('finds records by a substring of their key or name, without case', async function () {
    expect((await list('q=PAYROLL')).ids).to.deep.equal(['payroll-web', 'payroll-batch']);
    expect((await list('q=nightly')).ids).to.deep.equal(['payroll-batch']);
    const found = await list('q=payroll');
    expect(found.total).to.equal('2');
    expect((await list('q=nothing-like-this')).total).to.equal('0');
  });

  it('pages a search: the next link keeps q, and walks every match once', async function () {
    const first = await list('q=a&limit=2');
    expect(first.total).to.equal('5');
    expect(first.next).to.equal('/admin/api/clients?q=a&limit=2&offset=2');
    const seen = [...first.ids];
    let next = first.next;
    while (next) {
      const response = await server.request(next, { admin: true });
      seen.push(...((await response.json()) as { clientId: string }[]).map((client) => client.clientId));
      next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1] ?? null;
    }
    expect(seen.sort()).to.deep.equal(CLIENTS.map((client) => client.clientId).sort());
  });

  it('takes regex and LIKE metacharacters as themselves', async function () {
    for (const [q, ids] of [
      ['.*', ['wiki']],
      ['[beta]', ['wiki']],
      ['50%', ['wiki']],
      ['%', ['wiki']],
      ['_', ['a_b']],
      ['a_b', ['a_b']],
      ['^p', []],
      ['(web)', ['payroll-web']],
      ['(', ['payroll-web']],
      ['\\', []],
      ['$', []],
      ['|', []],
      ["' OR 1=1 --", []],
      ['{"$ne":null}', []],
    ] as [string, string[]][]) {
      const found = await list(`q=${encodeURIComponent(q)}`);
      expect(found.status, q).to.equal(200);
      expect(found.ids, q).to.deep.equal(ids);
      expect(found.total, q).to.equal(String(ids.length));
    }
  });

  it('never finds a record by a secret (its hash is not searched)', async function () {
    expect((await list('q=s3cret')).ids).to.deep.equal([]);
    expect((await list(`q=${encodeURIComponent('$2')}`)).ids).to.deep.equal([]);
  });

  it('refuses a q that is too long or holds control characters, and bad paging, with 400', async function () {
    for (const query of [
      `q=${'a'.repeat(201)}`,
      `q=${'%25'.repeat(5000)}`,
      'q=a%00b',
      'q=%0A',
      'q=%7F',
      'q=a&q=b',
      'offset=-1',
      'offset=1.5',
      'offset=99999999',
      'limit=0',
      'limit=-5',
      'limit=1001',
      'limit=',
    ]) {
      const found = await list(query);
      expect(found.status, query).to.equal(400);
      expect(found.body.error, query).to.equal('invalid_request');
    }
    expect((await list(`q=${'a'.repeat(200)}`)).status).to.equal(200);
  });

  it('answers a q with malformed percent-encoding as text, never a 500', async function () {
    for (const path of ['/admin/api/clients?q=%FF', '/admin/api/clients?q=%E0%A4%A', '/admin/api/clients?q=%']) {
      const response = await rawRequest(server.url, {
        path,
        headers: { 'X-Admin-API-Key': ADMIN_KEY, 'X-Tenant-Id': tenant },
      });
      expect(response.status, path).to.be.oneOf([200, 400]);
    }
  });

  it('keeps a search to the tenant of the call', async function () {
    const other = await server.request('/admin/api/clients?q=payroll', { admin: true, tenant: `${tenant}-other` });
    expect(other.status).to.equal(200);
    expect(await other.json()).to.deep.equal([]);
    expect(other.headers.get('x-total-count')).to.equal('0');
  });

  it('searches every collection on its own fields, and the named API keys by name', async function () {
    const subject = await server.admin('POST', '/subjects', {
      subjectId: 'sam-42',
      name: 'Samantha',
      email: 'sam@example.test',
    });
    expect(subject.status).to.equal(201);
    for (const q of ['SAM-4', 'mantha', 'example.test']) {
      const found = await server.request(`/admin/api/subjects?q=${encodeURIComponent(q)}`, { admin: true });
      expect(((await found.json()) as unknown[]).length, q).to.equal(1);
      expect(found.headers.get('x-total-count'), q).to.equal('1');
    }
    const key = await server.admin('POST', '/api-keys', { name: `searchable ${tenant}`, role: 'read-only' });
    expect(key.status).to.equal(201);
    const keys = await server.request(`/admin/api/api-keys?q=${encodeURIComponent(`SEARCHABLE ${tenant}`)}`, {
      admin: true,
    });
    expect(((await keys.json()) as { name: string }[]).map((each) => each.name)).to.deep.equal([
      `searchable ${tenant}`,
    ]);
    expect(keys.headers.get('x-total-count')).to.equal('1');
  });

  it('documents q, X-Total-Count and Link on every list of the OpenAPI document', async function () {
    const document = (await server.admin('GET', '/openapi.json')).body;
    const lists = Object.entries(document.paths as Record<string, any>).filter(
      ([path, operations]) =>
        !path.includes('{') && operations.get?.responses['200'].content?.['application/json'].schema.type === 'array',
    );
    expect(lists.length).to.be.greaterThan(9);
    for (const [path, operations] of lists) {
      const names = (operations.get.parameters as { name: string }[]).map((parameter) => parameter.name);
      expect(names, path).to.include.members(['offset', 'limit', 'q']);
      expect(Object.keys(operations.get.responses['200'].headers), path).to.include.members(['X-Total-Count', 'Link']);
    }
  });
});
