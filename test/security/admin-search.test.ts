import { expect } from 'chai';
import { COLLECTIONS, storeSpecOf } from '../../src/catalog/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import { MAX_WAITING_SCANS } from '../../adapters/sqlite/scans.js';
import { LOOP_HELD_BOUND_MS, loopDelays, probingLivez } from '../support/livez-probes.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * A search of the Admin API (`q`) reads every record of the tenant: on SQLite (synchronous) it
 * held every request of the process for its length (406 ms at 300,000 subjects), and a read-only
 * key could repeat it. Found 2026-11-29; searches now read in a thread of the store's own.
 */
describe('Admin API searches of a large tenant never hold the event loop (SQLite)', function () {
  this.timeout(120_000);
  let server: TestServer;
  const SUBJECTS = 200_000;

  before(async function () {
    // Its own server: 200,000 subjects.
    server = await readyServer();
    const subjects = server.store.collection(
      storeSpecOf(COLLECTIONS.find((collection) => collection.path === 'subjects')!),
      DEFAULT_TENANT,
    );
    for (let from = 0; from < SUBJECTS; from += 5_000)
      await subjects.insertMany(
        Array.from({ length: 5_000 }, (_, index) => ({
          id: 1_000_000 + from + index,
          subjectId: `user-${from + index}`,
          name: `Someone ${from + index}`,
          email: `user-${from + index}@example.com`,
        })),
      );
  });
  after(async function () {
    await server?.close();
  });

  it('answers /livez while searches that match nothing read 200,000 subjects, and finds what matches', async function () {
    const search = async (q: string) => {
      const answer = await server.admin('GET', `/subjects?q=${encodeURIComponent(q)}&limit=5`);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      return answer;
    };
    const searches = async () => {
      for (let round = 0; round < 3; round += 1) await search('no-such-subject');
    };
    const { probes, ms } = await probingLivez(server, searches(), 5);
    expect(ms, 'the searches took long enough to be seen').to.be.above(3 * 50);
    expect(probes.every((probe) => probe.status === 200)).to.equal(true);
    expect(Math.max(...loopDelays(probes))).to.be.below(LOOP_HELD_BOUND_MS);
    const found = await search('USER-199999@');
    expect(found.body.map((subject: { subjectId: string }) => subject.subjectId)).to.deep.equal(['user-199999']);
    expect(found.headers.get('x-total-count')).to.equal('1');
  });

  // Found 2026-11-29: each search read them twice, for its page and for its count, and the fifth
  // of eight at once was refused. A page that ends the list says its total itself.
  it(`serves ${MAX_WAITING_SCANS} searches at once, each one read of the tenant's records`, async function () {
    const answers = await Promise.all(
      Array.from({ length: MAX_WAITING_SCANS }, () => server.admin('GET', '/subjects?q=no-such-subject&limit=5')),
    );
    expect(answers.map((answer) => answer.status)).to.deep.equal(Array(MAX_WAITING_SCANS).fill(200));
    expect(answers.map((answer) => answer.headers.get('x-total-count'))).to.deep.equal(
      Array(MAX_WAITING_SCANS).fill('0'),
    );
  });

  it(`refuses a search beyond ${MAX_WAITING_SCANS} waiting with 503 and a retry time, and serves the others`, async function () {
    const answers = await Promise.all(
      Array.from({ length: 3 * MAX_WAITING_SCANS }, () => server.admin('GET', '/subjects?q=no-such-subject&limit=5')),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses, 'some served').to.include(200);
    const busy = answers.filter((answer) => answer.status === 503);
    expect(busy.length, String(statuses)).to.be.above(0);
    expect(busy[0]!.body).to.include({ error: 'temporarily_unavailable' });
    expect(busy[0]!.headers.get('retry-after')).to.match(/^\d+$/);
    expect(statuses.every((status) => status === 200 || status === 503)).to.equal(true);
  });
});
