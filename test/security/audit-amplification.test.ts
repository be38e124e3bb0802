import Database from 'better-sqlite3';
import { expect } from 'chai';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';
import { eventually } from '../support/oauth.js';
import { registerPublicClient } from '../support/dev-idp.js';
import { rawRequest } from '../support/raw-http.js';
import { MAX_AUDITED_STRING } from '../../src/audit/bounds.js';
import { AuditLog, type AuditEntry, type AuditFields } from '../../src/audit/log.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { callerAddress, RefusalBudget } from '../../src/audit/budget.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

const LIMIT = 20;
const USER_AGENT = `flood/${'u'.repeat(7 * 1024)}`;
const LONG = (letter: string) => letter.repeat(3000);
/** GET /authorize for a client that does not exist, with three 3,000-character parameters. */
const AUTHORIZE = `/authorize?response_type=code&client_id=${LONG('c')}&redirect_uri=${encodeURIComponent(`https://evil.example/${LONG('r')}`)}&scope=${LONG('s')}`;

interface Entry {
  id: number;
  endpoint: string;
  ip: string | null;
  tenantId: string | null;
  userAgent: string | null;
  clientId: string | null;
  requestSummary: Record<string, any>;
}

/** Every audit entry of every tenant, read through the Admin API from an address of its own. */
async function allEntries(server: TestServer): Promise<Entry[]> {
  const entries: Entry[] = [];
  for (let page = 0; ; page += 1) {
    const answer = await rawRequest(server.url, {
      path: `/admin/api/audit-logs?allTenants=true&size=1000&sort=id,asc&page=${page}`,
      localAddress: '127.0.0.99',
      headers: { 'X-Admin-API-Key': ADMIN_KEY },
    });
    const body = answer.json() as { content: Entry[]; totalPages: number };
    entries.push(...body.content);
    if (page + 1 >= body.totalPages) return entries;
  }
}

/**
 * The SQLite store's size as the database sees it: its pages, those still in the write-ahead log
 * included (a reader sees every commit). Not the files' sizes: the log file grows and is reused or
 * truncated as checkpoints happen to fall, which under load moved the figure by a megabyte with
 * the same rows written.
 */
function storeBytes(server: TestServer): number {
  const db = new Database(server.config.storeUrl.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
  try {
    return (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
  } finally {
    db.close();
  }
}

/** `total` requests, `parallel` at a time; resolves with how many got each status. */
async function flood(
  total: number,
  parallel: number,
  send: (n: number) => Promise<{ status: number }>,
): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  for (let start = 0; start < total; start += parallel) {
    const answers = await Promise.all(
      Array.from({ length: Math.min(parallel, total - start) }, (_, k) => send(start + k)),
    );
    for (const { status } of answers) statuses[status] = (statuses[status] ?? 0) + 1;
  }
  return statuses;
}

/**
 * Issue 27 item 4: a caller without credentials must not decide how much the audit log stores.
 * Before: 2,000 such requests grew the store by ~44 MB, and each made-up tenant id got its row.
 */
describe('Audit amplification by callers nobody authenticated', function () {
  this.timeout(300_000);

  describe('with the default budget and window', function () {
    let server: TestServer;
    before(async function () {
      // Its own server: it spends the audit budget of unauthenticated callers and measures the store.
      server = await readyServer({ AUDIT_UNAUTHENTICATED_LIMIT: String(LIMIT) });
    });
    after(async function () {
      await server?.close();
    });

    it('2,000 GET /authorize with 3,000-character parameters and a 7 KB User-Agent grow the store by less than 1 MB', async function () {
      const before = storeBytes(server);
      const statuses = await flood(2000, 20, () =>
        rawRequest(server.url, { path: AUTHORIZE, localAddress: '127.0.0.21', headers: { 'User-Agent': USER_AGENT } }),
      );
      expect(statuses, 'every one refused, none too large to be read').to.deep.equal({ 400: 2000 });
      const growth = storeBytes(server) - before;
      console.log(`      store growth for 2,000 requests: ${growth} bytes (database pages)`);
      expect(growth).to.be.below(1024 * 1024);

      const rows = (await allEntries(server)).filter((entry) => entry.ip === '127.0.0.21');
      expect(rows, 'one entry each for the budget, the rest counted').to.have.length(LIMIT);
      for (const row of rows) {
        expect(row.userAgent!.length).to.be.at.most(MAX_AUDITED_STRING + 1);
        expect(row.clientId!.length).to.be.at.most(MAX_AUDITED_STRING + 1);
        expect(row.endpoint).to.equal('/authorize');
        expect(JSON.stringify(row).length, 'a bounded row').to.be.below(4096);
      }
    });

    it("counts a public client's GET /authorize against the address, sent to sign in or sent an error: no more rows than the budget, the errors as refusals", async function () {
      const { clientId, redirectUri } = await registerPublicClient(server, 'https://app.example.test/cb');
      const authorize = (extra: string) =>
        `/authorize?response_type=code&client_id=${clientId}&redirect_uri=${encodeURIComponent(redirectUri)}` +
        `&scope=openid&code_challenge=${'c'.repeat(43)}&code_challenge_method=S256&state=s${extra}`;
      // Sent on to sign in (no decision yet) from one address; sent login_required at the redirect_uri from another.
      const cases = [
        { address: '127.0.0.51', path: authorize(''), outcome: 'allow' },
        { address: '127.0.0.52', path: authorize('&prompt=none'), outcome: 'deny' },
      ];
      for (const { address, path } of cases)
        expect(await flood(60, 10, () => rawRequest(server.url, { path, localAddress: address }))).to.deep.equal({
          302: 60,
        });
      const entries = await allEntries(server);
      for (const { address, outcome } of cases) {
        const rows = entries.filter((entry) => entry.ip === address);
        expect(rows, `${address}: one entry each for the budget, the rest counted`).to.have.length(LIMIT);
        expect(new Set(rows.map((row) => (row as { outcome?: string }).outcome))).to.deep.equal(new Set([outcome]));
      }
    });

    it('counts refused open registrations against the address, whatever members they carry: no more rows than the budget, none with the padding', async function () {
      const body = JSON.stringify({
        redirect_uris: ['https://app.example.test/cb'],
        token_endpoint_auth_method: 'none',
        padding: 'p'.repeat(20_000),
      });
      const statuses = await flood(100, 10, () =>
        rawRequest(server.url, {
          method: 'POST',
          path: '/register',
          localAddress: '127.0.0.41',
          headers: { 'Content-Type': 'application/json' },
          body,
        }),
      );
      expect(statuses, 'registration is closed').to.deep.equal({ 400: 100 });
      const rows = (await allEntries(server)).filter((entry) => entry.ip === '127.0.0.41');
      expect(rows, 'one entry each for the budget, the rest counted').to.have.length(LIMIT);
      for (const row of rows)
        expect(JSON.stringify(row), 'the padding is no member registration reads').not.to.contain('ppppp');
    });

    it('writes no row per request for a flood of tenant ids that do not exist', async function () {
      const addresses = ['127.0.0.31', '127.0.0.32', '127.0.0.33', '127.0.0.34'];
      const statuses = await flood(1000, 20, (n) =>
        rawRequest(server.url, {
          method: 'POST',
          path: '/token',
          localAddress: addresses[n % addresses.length],
          headers: {
            'Content-Type': 'application/x-www-form-urlencoded',
            'X-Tenant-Id': `ghost-${n}-${'t'.repeat(50)}`,
          },
          body: 'grant_type=client_credentials',
        }),
      );
      expect(statuses).to.deep.equal({ 400: 1000 });
      const entries = await allEntries(server);
      expect(
        entries.filter((entry) => entry.tenantId?.startsWith('ghost-')),
        'rows naming a made-up tenant',
      ).to.have.length(0);
      expect(
        entries.filter((entry) => addresses.includes(entry.ip ?? '')),
        'rows of the flooding addresses (counted until the window ends)',
      ).to.have.length(0);
    });
  });

  describe('from many addresses (AUDIT_UNAUTHENTICATED_TOTAL_LIMIT)', function () {
    const TOTAL = 100;
    let server: TestServer;
    before(async function () {
      // Its own server: a node-wide budget spent by this test alone, in one long window.
      server = await readyServer({
        AUDIT_UNAUTHENTICATED_LIMIT: String(LIMIT),
        AUDIT_UNAUTHENTICATED_TOTAL_LIMIT: String(TOTAL),
        AUDIT_AGGREGATE_WINDOW_SECONDS: '3600',
      });
    });
    after(async function () {
      await server?.close();
    });

    /** The n-th of 2,000 loopback addresses 127.1.x.y (all of 127/8 is loopback). */
    const address = (n: number) => `127.1.${Math.floor(n / 250)}.${(n % 250) + 1}`;

    it('2,000 refused requests from 2,000 addresses write no more full rows than the node-wide budget', async function () {
      const before = storeBytes(server);
      const statuses = await flood(2000, 20, (n) =>
        rawRequest(server.url, { path: AUTHORIZE, localAddress: address(n), headers: { 'User-Agent': USER_AGENT } }),
      );
      expect(statuses).to.deep.equal({ 400: 2000 });
      const growth = storeBytes(server) - before;
      const rows = (await allEntries(server)).filter((entry) => entry.ip?.startsWith('127.1.'));
      console.log(`      2,000 addresses: ${rows.length} rows, store growth ${growth} bytes (database pages)`);
      expect(rows.length, 'full rows of the flooding addresses').to.be.at.most(TOTAL);
      expect(rows.length, 'the budget is spent before anything is counted').to.equal(TOTAL);
    });

    it('counts what is past the node-wide budget in one entry per tenant, by endpoint and status; an IPv6 caller is its /64', function () {
      const written: AuditFields[] = [];
      const budget = new RefusalBudget({ perWindow: 2, totalPerWindow: 3, windowSeconds: 3600 }, (entry) =>
        written.push(entry),
      );
      const refusal = (ip: string, endpoint: string, status: number): AuditFields =>
        ({ endpoint, method: 'GET', ip, tenantId: null, requestSummary: { status } }) as unknown as AuditFields;
      const admitted = Array.from({ length: 50 }, (_, n) =>
        budget.admit(refusal(`10.0.${n}.1`, n % 2 ? '/authorize' : '/token', n % 2 ? 400 : 401), false),
      );
      expect(admitted.filter(Boolean), 'full entries').to.have.length(3);
      budget.close();
      expect(written, 'one node-wide entry').to.have.length(1);
      expect(written[0]!.ip).to.equal(null);
      expect(written[0]!.requestSummary).to.deep.include({
        kind: 'aggregated',
        count: 47,
        address: '*',
        endpoints: { '/authorize': 24, '/token': 23 },
        statuses: { 400: 24, 401: 23 },
      });
      expect(written[0]!.requestSummary.addressSample).to.have.length(10);
      expect(callerAddress('2001:db8:1:2:3:4:5:6')).to.equal(callerAddress('2001:db8:1:2:ffff::1'));
    });
  });

  describe('aggregated entries', function () {
    let server: TestServer;
    before(async function () {
      // Its own server: a budget of five, spent by this test alone.
      server = await readyServer({ AUDIT_UNAUTHENTICATED_LIMIT: '5', AUDIT_AGGREGATE_WINDOW_SECONDS: '1' });
    });
    after(async function () {
      await server?.close();
    });

    it('counts the refusals beyond the budget into one entry per address and window, which the Admin API reads like any other', async function () {
      await flood(30, 10, () =>
        rawRequest(server.url, {
          path: '/userinfo',
          localAddress: '127.0.0.41',
          headers: { 'User-Agent': USER_AGENT },
        }),
      );
      let aggregated: Entry[] = [];
      // The aggregated entries are written when their window ends: wait until the entries account
      // for every refusal (on a loaded machine the flood may span two windows, each with its budget).
      await eventually(async () => {
        const entries = (await allEntries(server)).filter((entry) => entry.ip === '127.0.0.41');
        aggregated = entries.filter((entry) => entry.requestSummary.kind === 'aggregated');
        const singles = entries.length - aggregated.length;
        return singles + aggregated.reduce((total, entry) => total + entry.requestSummary.count, 0) >= 30;
      }, 30_000);
      const first = aggregated[0]!;
      expect(first.endpoint).to.equal('/userinfo');
      expect(first.requestSummary).to.include({ kind: 'aggregated', address: '127.0.0.41' });
      expect(first.requestSummary.statuses).to.have.property('401');
      expect(first.requestSummary.window).to.have.keys('start', 'end');
      const single = (await allEntries(server)).filter(
        (entry) => entry.ip === '127.0.0.41' && entry.requestSummary.kind !== 'aggregated',
      );
      expect(
        single.length + aggregated.reduce((total, entry) => total + entry.requestSummary.count, 0),
        'nothing lost, nothing counted twice',
      ).to.equal(30);
      expect(single.length, 'the budget of the first window, perhaps of a second').to.be.within(5, 10);

      const page = await rawRequest(server.url, {
        path: `/admin/api/audit-logs?endpoint=%2Fuserinfo&size=100`,
        localAddress: '127.0.0.99',
        headers: { 'X-Admin-API-Key': ADMIN_KEY },
      });
      expect(page.status).to.equal(200);
      expect(page.json().content.some((entry: Entry) => entry.requestSummary.kind === 'aggregated')).to.equal(true);
      const one = await rawRequest(server.url, {
        path: `/admin/api/audit-logs/${first.id}`,
        localAddress: '127.0.0.99',
        headers: { 'X-Admin-API-Key': ADMIN_KEY },
      });
      expect(one.json().requestSummary.count).to.equal(first.requestSummary.count);
    });

    it('still writes every request of an authenticated caller in full, refused ones included', async function () {
      const statuses = await flood(30, 10, (n) =>
        rawRequest(server.url, {
          path: `/admin/api/subjects/missing-${n}`,
          localAddress: '127.0.0.42',
          headers: { 'X-Admin-API-Key': ADMIN_KEY, 'User-Agent': USER_AGENT },
        }),
      );
      expect(statuses).to.deep.equal({ 404: 30 });
      const mine = (await allEntries(server)).filter((entry) => entry.ip === '127.0.0.42');
      expect(mine).to.have.length(30);
      for (const entry of mine) expect(entry.userAgent, 'as sent').to.equal(USER_AGENT);
    });
  });

  describe('retention (AUDIT_RETENTION_DAYS)', function () {
    let server: TestServer;
    before(async function () {
      // Its own server: the entries it writes have ids above any real one, and would pass for the newest entry in other files' queries.
      server = await readyServer();
    });
    after(async function () {
      await server?.close();
    });

    it('deletes the entries older than the retention, in steps, through the store, and keeps the newer ones', async function () {
      const DAY = 86_400_000;
      const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
      const entry = (id: number, ageDays: number) =>
        ({
          id,
          createdAt: new Date(Date.now() - ageDays * DAY).toISOString(),
          endpoint: '/token',
          method: 'POST',
        }) as unknown as AuditEntry;
      await entries.insertMany(Array.from({ length: 2500 }, (_, n) => entry(900_000_000 + n, 91 + (n % 30))));
      await entries.insertMany([entry(900_100_000, 89), entry(900_100_001, 1)]);
      const removed = await new AuditLog(server.store).purgeOlderThan(new Date(Date.now() - 90 * DAY));
      expect(removed).to.equal(2500);
      expect(await entries.get(900_000_000)).to.equal(null);
      expect(await entries.get(900_100_000), 'within the retention').to.not.equal(null);
      expect(await entries.get(900_100_001)).to.not.equal(null);
    });
  });
});
