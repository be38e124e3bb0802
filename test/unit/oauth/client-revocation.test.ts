import { expect } from 'chai';
import type { AdapterPayload } from 'oidc-provider';
import { createOidcAdapter } from '../../../adapters/oidc/index.js';
import { clientsCollection, type ClientRecord } from '../../../src/oauth/clients/records.js';
import { clientArtefactOwners, revokeClientArtefacts } from '../../../src/oauth/shared/owned-artefacts.js';
import { openStore } from '../../../src/store/open.js';
import { DEFAULT_TENANT, type Store } from '../../../src/store/index.js';

/**
 * A client's revocation deletes every artefact of it (src/oauth/shared/owned-artefacts.ts). Found
 * 2026-11-29: a revocation that deleted only the artefacts of the epoch it ended left one of an
 * earlier epoch, which a client ID metadata document's record, made again at epoch 0 after its
 * expiry, came round to honour again.
 */
describe("A client's revocation", function () {
  let store: Store;
  const clientId = 'https://app.example.test/client.json';

  beforeEach(async function () {
    store = await openStore('sqlite::memory:');
  });
  afterEach(async function () {
    await store.close();
  });

  it('deletes a token of an earlier epoch too, which a client ID metadata document made again would honour', async function () {
    const clients = clientsCollection(store, DEFAULT_TENANT);
    const record = {
      clientId,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      registrationType: 'cimd',
      redirectUris: ['https://app.example.test/cb'],
      enabled: true,
    } as unknown as ClientRecord;
    await clients.insert({ ...record, id: 1 });
    const Adapter = createOidcAdapter(store, DEFAULT_TENANT, {}, clientArtefactOwners(store, DEFAULT_TENANT));
    const tokens = new Adapter('RefreshToken');
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
    const found = async () => (await nextTurn(), (await tokens.find('refresh-1')) !== undefined);

    await revokeClientArtefacts(store, DEFAULT_TENANT, clientId); // epoch 0 → 1
    await nextTurn();
    const payload = { clientId, accountId: 'alice', grantId: 'g1', kind: 'RefreshToken' } as unknown as AdapterPayload;
    await tokens.upsert('refresh-1', { ...payload, exp: Math.floor(Date.now() / 1000) + 86_400 }, 86_400);
    expect(await found(), 'issued under epoch 1').to.equal(true);
    // The document's record expires and is made again on its next use: epoch 0.
    await clients.delete(1);
    await clients.insert({ ...record, id: 2 });
    expect(await found(), 'under another epoch').to.equal(false);

    await revokeClientArtefacts(store, DEFAULT_TENANT, clientId); // epoch 0 → 1 again
    expect(await found(), 'not honoured again at epoch 1').to.equal(false);
  });
});
