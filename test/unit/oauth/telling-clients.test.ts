import { expect } from 'chai';
import type Provider from 'oidc-provider';
import { OIDC_COLLECTION } from '../../../adapters/oidc/collection.js';
import { reportBackchannelLogouts, tellClientsOfLogout } from '../../../src/oauth/end-session/backchannel.js';
import { createLogger } from '../../../src/log/index.js';
import { openStore } from '../../../src/store/open.js';
import { DEFAULT_TENANT } from '../../../src/store/index.js';

/**
 * A change that ends a user's sessions tells their clients, then revokes the user's tokens. Found
 * 2026-11-29: 8 deliveries at a time, each up to the outbound timeout, so a user of many sessions
 * at a client that hangs held the revocation for as long as they had sessions.
 */
describe('Telling clients of a logout', function () {
  it('tells them for a bounded time, and keeps the deliveries not begun by then for the outbox', async function () {
    const store = await openStore('sqlite::memory:');
    try {
      await store.collection(OIDC_COLLECTION, DEFAULT_TENANT).insertMany(
        Array.from({ length: 12 }, (_, index) => ({
          id: `Session:${String(index).padStart(2, '0')}`,
          model: 'Session',
          accountId: 'alice',
          payload: { accountId: 'alice', authorizations: { slow: { sid: `sid-${index}` } } },
        })),
      );
      let posted = 0;
      const client = {
        clientId: 'slow',
        backchannelLogoutUri: 'https://slow.example.test/logout',
        backchannelLogout: async () => {
          posted += 1;
          await new Promise((resolve) => setTimeout(resolve, 300));
        },
      };
      const provider = { on: () => undefined, Client: { find: async () => client } } as unknown as Provider;
      const kept: unknown[] = [];
      reportBackchannelLogouts(
        provider,
        createLogger('silent'),
        { append: async (entries) => void kept.push(...entries) },
        '',
      );
      const told = await tellClientsOfLogout(async () => provider, store, null, 'alice', createLogger('silent'), 100);
      expect(posted).to.equal(8);
      expect(told).to.deep.equal({ delivered: 8, failed: 4, kept: 4 });
      expect(kept).to.have.length(4);
    } finally {
      await store.close();
    }
  });
});
