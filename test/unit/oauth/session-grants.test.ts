import { expect } from 'chai';
import { artefactKey, revokeSessionGrants } from '../../../adapters/oidc/index.js';
import { OIDC_COLLECTION } from '../../../adapters/oidc/collection.js';
import { memoryStore, TENANT } from '../../support/unit.js';

/**
 * What a logout revokes (OIDC Back-Channel Logout 1.0 §2.7): every grant a token or code of the
 * session belongs to, at one client or all, but not a grant that holds offline_access, nor
 * another session's.
 */
describe('revokeSessionGrants (adapters/oidc)', function () {
  const store = memoryStore();
  const artefact = (id: string, fields: { grantId: string; clientId: string; sessionUid: string; scope: string }) => ({
    id,
    model: 'RefreshToken',
    grantId: fields.grantId,
    clientId: fields.clientId,
    accountId: 'alice',
    expiresAt: Date.now() + 3_600_000,
    payload: { jti: id, sessionUid: fields.sessionUid, scope: fields.scope, accountId: 'alice' },
  });
  const left = async () =>
    (await store().collection(OIDC_COLLECTION, TENANT).find({})).map((doc) => doc.id as string).sort();

  beforeEach(async function () {
    const artefacts = store().collection(OIDC_COLLECTION, TENANT);
    await artefacts.deleteMany({});
    await artefacts.insertMany([
      artefact('spa-1', { grantId: 'g1', clientId: 'spa', sessionUid: 's1', scope: 'openid' }),
      // The same grant's token issued by refresh in no session still goes with its grant.
      artefact('spa-1b', { grantId: 'g1', clientId: 'spa', sessionUid: 'other', scope: 'openid' }),
      artefact('app-2', { grantId: 'g2', clientId: 'app', sessionUid: 's1', scope: 'openid profile' }),
      artefact('offline', { grantId: 'g3', clientId: 'spa', sessionUid: 's1', scope: 'openid offline_access' }),
      artefact('elsewhere', { grantId: 'g4', clientId: 'spa', sessionUid: 's2', scope: 'openid' }),
    ]);
  });

  it('revokes the grants of the session at every client, except offline_access and other sessions', async function () {
    expect(await revokeSessionGrants(store(), TENANT, { accountId: 'alice', uid: 's1' })).to.equal(3);
    expect(await left()).to.deep.equal(['elsewhere', 'offline']);
  });

  it('finds the session however many artefacts the user holds (found 2026-11-29: one read of 10,000 missed it)', async function () {
    const artefacts = store().collection(OIDC_COLLECTION, TENANT);
    const others = Array.from({ length: 10_050 }, (_, index) =>
      artefact(`a-${String(index).padStart(5, '0')}`, {
        grantId: `other-${index}`,
        clientId: 'spa',
        sessionUid: 'older',
        scope: 'openid',
      }),
    );
    for (let from = 0; from < others.length; from += 1000) await artefacts.insertMany(others.slice(from, from + 1000));
    await artefacts.insert(
      artefact('z-last', { grantId: 'g-last', clientId: 'spa', sessionUid: 's9', scope: 'openid' }),
    );
    expect(await revokeSessionGrants(store(), TENANT, { accountId: 'alice', uid: 's9' })).to.equal(1);
    expect(await artefacts.get('z-last')).to.equal(null);
  });

  it("deletes the grant's own record too, kept under its own id", async function () {
    const artefacts = store().collection(OIDC_COLLECTION, TENANT);
    const grant = artefactKey('Grant', 'g1');
    await artefacts.insert({ id: grant, model: 'Grant', accountId: 'alice', clientId: 'spa', payload: {} });
    expect(await revokeSessionGrants(store(), TENANT, { accountId: 'alice', uid: 's1' })).to.equal(4);
    expect(await artefacts.get(grant)).to.equal(null);
  });

  it('at one client when the logout names one', async function () {
    expect(await revokeSessionGrants(store(), TENANT, { accountId: 'alice', uid: 's1', clientId: 'app' })).to.equal(1);
    expect(await left()).to.deep.equal(['elsewhere', 'offline', 'spa-1', 'spa-1b']);
  });
});
