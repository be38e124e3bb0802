import { expect } from 'chai';
import { inTenant, withServer, type TestServer } from '../support/server.js';

/**
 * The console's own reads in the audit log: a successful Admin GET with a valid key and
 * X-Arbiter-Console: 1 is written, marked consoleRead, and left out of the list on
 * hideConsoleReads=true. The header can never hide anything else: writes, refusals and calls
 * without a valid key stay unmarked whoever sends it.
 */
describe("Audit log: the console's own reads", function () {
  let server: TestServer;
  const tenant = `console-reads-${Math.random().toString(36).slice(2, 8)}`;
  const CONSOLE = { 'X-Arbiter-Console': '1' };

  before(async function () {
    server = inTenant(await withServer(), tenant);
  });

  /** The entries of `endpoint` in this file's tenant, newest first, with or without the console's reads. */
  async function entries(endpoint: string, hideConsoleReads?: boolean): Promise<any[]> {
    const query = new URLSearchParams({ endpoint, sort: 'id,desc', size: '100' });
    if (hideConsoleReads !== undefined) query.set('hideConsoleReads', String(hideConsoleReads));
    const page = await server.admin('GET', `/audit-logs?${query}`);
    expect(page.status, JSON.stringify(page.body)).to.equal(200);
    return page.body.content;
  }

  it('marks a successful GET the console made with a valid key, and hides it on hideConsoleReads=true', async function () {
    expect((await server.admin('GET', '/subjects', undefined, CONSOLE)).status).to.equal(200);
    const all = await entries('/admin/api/subjects');
    expect(all).to.have.length(1);
    expect(all[0]).to.include({ method: 'GET', consoleRead: true, tenantId: tenant });
    expect(all[0].requestSummary.adminKey.name).to.equal('bootstrap');
    expect(await entries('/admin/api/subjects', true)).to.deep.equal([]);
    expect(await entries('/admin/api/subjects', false)).to.have.length(1);
  });

  it('never marks a write, whatever header it carries: creates, replaces, deletes and checks stay listed', async function () {
    const path = '/admin/api/resource-types';
    const created = await server.admin('POST', '/resource-types', { typeUri: 'urn:console:reads' }, CONSOLE);
    expect(created.status).to.equal(201);
    const id = created.body.id as number;
    expect(
      (await server.admin('PUT', `/resource-types/${id}`, { typeUri: 'urn:console:reads', name: 'n' }, CONSOLE)).status,
    ).to.equal(200);
    expect(
      (await server.admin('POST', '/resource-types/validate', { typeUri: 'urn:console:other' }, CONSOLE)).status,
    ).to.equal(200);
    expect((await server.admin('DELETE', `/resource-types/${id}`, undefined, CONSOLE)).status).to.equal(204);
    const hidden = [
      ...(await entries(path, true)),
      ...(await entries(`${path}/${id}`, true)),
      ...(await entries(`${path}/validate`, true)),
    ];
    expect(hidden.map((entry) => entry.method).sort()).to.deep.equal(['DELETE', 'POST', 'POST', 'PUT']);
    for (const entry of hidden) expect(entry).not.to.have.property('consoleRead');
  });

  it('never marks a refused GET (no key, a wrong key, an unknown record, a bad query) nor one without the header', async function () {
    const path = '/admin/api/clients';
    expect((await server.request(path, { headers: CONSOLE })).status).to.equal(401);
    expect((await server.request(path, { key: 'not-a-key', headers: CONSOLE })).status).to.equal(401);
    expect((await server.request(`${path}?limit=0`, { admin: true, headers: CONSOLE })).status).to.equal(400);
    expect((await server.request(`${path}/nobody`, { admin: true, headers: CONSOLE })).status).to.equal(404);
    expect((await server.request(path, { admin: true })).status).to.equal(200);
    for (const value of ['true', '0', 'yes', '1, 1'])
      expect((await server.request(path, { admin: true, headers: { 'X-Arbiter-Console': value } })).status).to.equal(
        200,
      );
    const listed = [...(await entries(path, true)), ...(await entries(`${path}/nobody`, true))];
    expect(listed).to.have.length(9);
    for (const entry of listed) expect(entry).not.to.have.property('consoleRead');
  });

  it('refuses a hideConsoleReads that is not true or false with 400', async function () {
    const refused = await server.admin('GET', '/audit-logs?hideConsoleReads=yes');
    expect(refused.status).to.equal(400);
    expect(refused.body.field).to.equal('hideConsoleReads');
  });
});
