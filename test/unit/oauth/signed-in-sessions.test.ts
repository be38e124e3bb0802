import { expect } from 'chai';
import { OIDC_COLLECTION } from '../../../adapters/oidc/collection.js';
import { signedInSessions } from '../../../adapters/oidc/index.js';
import { openStore } from '../../../src/store/open.js';
import { DEFAULT_TENANT } from '../../../src/store/index.js';

/** The sessions whose clients a user's logout tells (OIDC Back-Channel Logout 1.0). */
describe("A user's sessions told of a logout", function () {
  // Found 2026-11-29: at most 100 were read, so the clients of a user's 101st session were not told.
  it('are all of them, read a page at a time, and no other artefact of the user', async function () {
    const store = await openStore('sqlite::memory:');
    try {
      const artefacts = store.collection(OIDC_COLLECTION, DEFAULT_TENANT);
      const session = (index: number) => ({
        id: `Session:${String(index).padStart(4, '0')}`,
        model: 'Session',
        accountId: 'alice',
        payload: { accountId: 'alice', authorizations: { app: { sid: `sid-${index}` } } },
        expiresAt: Date.now() + 3_600_000,
      });
      await artefacts.insertMany(Array.from({ length: 450 }, (_, index) => session(index)));
      await artefacts.insert({ id: 'AccessToken:x', model: 'AccessToken', accountId: 'alice', payload: {} });
      await artefacts.insert({ ...session(999), accountId: 'bob', payload: { accountId: 'bob', authorizations: {} } });
      const told = await signedInSessions(store, DEFAULT_TENANT, 'alice');
      expect(told).to.have.length(450);
      expect(new Set(told.map((each) => each.sids.app)).size).to.equal(450);
    } finally {
      await store.close();
    }
  });
});
