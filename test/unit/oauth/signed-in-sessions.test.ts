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

  // Found 2026-11-29: a page began one past the previous page's last session, which was gone.
  it('leaves none unread when the last session of a page ends before the next page is read', async function () {
    const store = await openStore('sqlite::memory:');
    try {
      const artefacts = store.collection(OIDC_COLLECTION, DEFAULT_TENANT);
      await artefacts.insertMany(
        Array.from({ length: 450 }, (_, index) => ({
          id: `Session:${String(index).padStart(4, '0')}`,
          model: 'Session',
          accountId: 'alice',
          payload: { accountId: 'alice', authorizations: { app: { sid: `sid-${index}` } } },
        })),
      );
      const collection = store.collection.bind(store);
      let pages = 0;
      store.collection = ((spec: Parameters<typeof collection>[0], tenant?: string) => {
        const opened = collection(spec, tenant);
        return Object.assign(Object.create(opened) as typeof opened, {
          find: async (...args: Parameters<typeof opened.find>) => {
            const page = await opened.find(...args);
            // The last session of the first page (of 200) ends meanwhile.
            if (pages++ === 0) await opened.delete('Session:0199');
            return page;
          },
        });
      }) as typeof store.collection;
      const told = (await signedInSessions(store, DEFAULT_TENANT, 'alice')).map((each) => each.sids.app);
      expect(told).to.have.length(450);
      expect(told).to.include('sid-200');
    } finally {
      await store.close();
    }
  });
});
