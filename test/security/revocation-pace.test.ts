import { expect } from 'chai';
import { DELEGATIONS_COLLECTION } from '../../src/delegation/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import { LOOP_HELD_BOUND_MS, loopDelays, probingLivez } from '../support/livez-probes.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * Revoking what hangs on a user, a client or a resource can touch tens of thousands of records:
 * on SQLite each write is synchronous, so it must go in paced steps (found 2026-11-29: deleting a
 * subject that owned 20,000 delegations held every request of the process 1.1 s).
 */
describe('Revocations of many records never hold the event loop (SQLite)', function () {
  this.timeout(120_000);
  let server: TestServer;

  before(async function () {
    // Its own server: 5,000 delegations.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  it('revokes the 5,000 delegations of a subject deleted, answering /livez meanwhile', async function () {
    const created = await server.admin('POST', '/subjects', { subjectId: 'prolific', name: 'Prolific Owner' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const delegations = server.store.collection(DELEGATIONS_COLLECTION, DEFAULT_TENANT);
    const COUNT = 5_000;
    for (let from = 0; from < COUNT; from += 1_000)
      await delegations.insertMany(
        Array.from({ length: 1_000 }, (_, index) => ({
          id: `d-${from + index}`,
          ownerSub: 'prolific',
          ownerClientId: 'photos-app',
          granteeType: 'subject',
          granteeSubjectId: `friend-${from + index}`,
          granteeClientId: null,
          resourceId: 'r1',
          scopes: ['view'],
          validUntil: null,
          createdAt: new Date().toISOString(),
          revokedAt: null,
        })),
      );
    const { result, probes } = await probingLivez(server, server.admin('DELETE', `/subjects/${created.body.id}`), 5);
    expect(result.status).to.equal(204);
    expect(probes.every((probe) => probe.status === 200)).to.equal(true);
    expect(Math.max(...loopDelays(probes))).to.be.below(LOOP_HELD_BOUND_MS);
    expect(await delegations.count({ revokedAt: null })).to.equal(0);
  });
});
