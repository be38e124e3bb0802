import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { OIDC_COLLECTION } from '../../adapters/oidc/collection.js';
import { revokeSessionGrants } from '../../adapters/oidc/index.js';
import { DELEGATIONS_COLLECTION } from '../../src/delegation/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import { LOOP_HELD_BOUND_MS, loopDelays, probingLivez } from '../support/livez-probes.js';
import { clientToken, clientWithToken, confidentialClient, postForm } from '../support/oauth.js';
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
    // Its own server: 5,000 delegations, 50,000 tokens twice, 10,000 users.
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

  /** Found 2026-11-29: one DELETE of a client's 100,000 tokens held every request 438 ms. */
  it("revokes a client's 50,000 tokens, answering /livez meanwhile, and keeps what it is issued after", async function () {
    const secret = await confidentialClient(server, 'busy-service');
    const artefacts = server.store.collection(OIDC_COLLECTION, DEFAULT_TENANT);
    await clientToken(server, 'busy-service', secret);
    const [issued] = await artefacts.find({ clientId: 'busy-service' });
    const COUNT = 50_000;
    for (let from = 0; from < COUNT; from += 2_000)
      await artefacts.insertMany(
        Array.from({ length: 2_000 }, () => ({
          ...issued,
          id: `ClientCredentials:${createHash('sha256').update(randomBytes(16)).digest('base64url')}`,
        })),
      );
    const { result, probes } = await probingLivez(
      server,
      server.admin('POST', '/clients/busy-service/revoke-tokens'),
      5,
    );
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    expect(result.body.revoked).to.equal(COUNT + 1);
    expect(probes.every((probe) => probe.status === 200)).to.equal(true);
    expect(Math.max(...loopDelays(probes))).to.be.below(LOOP_HELD_BOUND_MS);
    expect(await artefacts.count({ clientId: 'busy-service' })).to.equal(0);

    const after = await clientToken(server, 'busy-service', secret);
    await server.admin('POST', '/clients/busy-service/revoke-tokens');
    const again = await clientToken(server, 'busy-service', secret);
    const { token: resourceServer } = await clientWithToken(server, 'busy-resource-server', ['introspection']);
    const shown = async (token: string) =>
      (await postForm(server, '/introspect', { token }, { Authorization: `Bearer ${resourceServer}` })).body.active;
    expect([await shown(after), await shown(again)]).to.deep.equal([false, true]);
  });

  /**
   * Found 2026-11-29: a logout read the user's artefacts a page at a time, each page sorting all
   * of them (100,000: 10.5 s), and deleted the session's grant in one DELETE.
   */
  it("revokes at a logout the session's grant of 20,000 artefacts among the user's 50,000, answering /livez meanwhile", async function () {
    const artefacts = server.store.collection(OIDC_COLLECTION, DEFAULT_TENANT);
    const exp = Math.floor(Date.now() / 1000) + 3600;
    const artefact = (index: number, grantId: string, sessionUid: string) => ({
      id: `RefreshToken:${createHash('sha256').update(randomBytes(16)).digest('base64url')}`,
      model: 'RefreshToken',
      payload: { accountId: 'heavy-user', clientId: 'app', grantId, sessionUid, kind: 'RefreshToken', exp, n: index },
      expiresAt: exp * 1000,
      idDigest: 'sha256',
      hadJti: true,
      ownersIndexed: true,
      grantId,
      clientId: 'app',
      accountId: 'heavy-user',
      issuedUnder: null,
    });
    for (let from = 0; from < 50_000; from += 2_000)
      await artefacts.insertMany(
        Array.from({ length: 2_000 }, (_, index) =>
          from + index < 20_000
            ? artefact(from + index, 'grant-of-the-session', 'the-session')
            : artefact(from + index, `grant-${from + index}`, 'another-session'),
        ),
      );
    const { result, probes } = await probingLivez(
      server,
      revokeSessionGrants(server.store, DEFAULT_TENANT, { accountId: 'heavy-user', uid: 'the-session' }),
      5,
    );
    expect(result).to.equal(20_000);
    expect(probes.every((probe) => probe.status === 200)).to.equal(true);
    expect(Math.max(...loopDelays(probes))).to.be.below(LOOP_HELD_BOUND_MS);
    expect(await artefacts.count({ accountId: 'heavy-user' })).to.equal(30_000);
  });

  /** Found 2026-11-29: a revocation per subject, one after another, never gave the event loop back. */
  it('revokes the tokens of the 10,000 users of an identity provider disabled, answering /livez meanwhile', async function () {
    const created = await server.admin('POST', '/identity-providers', { issuer: 'https://many-users.example.test' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const subjects = server.store.collection('subjects', DEFAULT_TENANT);
    const COUNT = 10_000;
    await subjects.insertMany(
      Array.from({ length: COUNT }, (_, index) => ({
        id: 1_000_000 + index,
        subjectId: `many-${index}`,
        identityProviderId: created.body.id,
      })),
    );
    const { result, probes } = await probingLivez(
      server,
      server.admin('PUT', `/identity-providers/${created.body.idpId}`, { ...created.body, enabled: false }),
      5,
    );
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    expect(probes.every((probe) => probe.status === 200)).to.equal(true);
    expect(Math.max(...loopDelays(probes))).to.be.below(LOOP_HELD_BOUND_MS);
  });
});
