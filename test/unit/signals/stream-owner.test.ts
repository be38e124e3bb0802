import { expect } from 'chai';
import { clientRecords } from '../../../src/catalog/index.js';
import { ownedByLiveClient, streamOwner } from '../../../src/signals/streams.js';
import { memoryStore, saveClient, TENANT } from '../../support/unit.js';

/**
 * A Shared Signals stream belongs to the client record that made it (src/signals/streams.ts), but a
 * client ID metadata document's record comes and goes with its cache: its stream is pinned to no
 * record (found 2026-11-29: pinned to one, it went silent for good once the record was made anew).
 */
describe('unit: who owns a Shared Signals stream', function () {
  const store = memoryStore();
  const DOCUMENT = 'https://app.example.test/client.json';

  it("keeps a client ID metadata document's stream its own when its record is made anew, or has expired", async function () {
    await saveClient(store(), DOCUMENT, { registrationType: 'cimd', clientType: 'public' });
    const owner = await streamOwner(store(), TENANT, DOCUMENT);
    expect(owner).to.deep.equal({ live: true });
    const stream = {
      ownerClientId: DOCUMENT,
      ...(owner.recordId === undefined ? {} : { ownerRecordId: owner.recordId }),
    };
    const records = clientRecords(store(), TENANT);
    const first = (await records.findOne({ clientId: DOCUMENT }))!;
    await records.delete(first.id);
    expect(await ownedByLiveClient(store(), TENANT, stream), 'expired: made again on its next use').to.equal(true);
    await saveClient(store(), DOCUMENT, { registrationType: 'cimd', clientType: 'public' });
    expect(await ownedByLiveClient(store(), TENANT, stream), 'made anew under another id').to.equal(true);
  });

  it("pins another client's stream to its record: one made again under its client_id, or disabled, owns none", async function () {
    await saveClient(store(), 'receiver-rs');
    const owner = await streamOwner(store(), TENANT, 'receiver-rs');
    expect(owner.recordId).to.be.a('number');
    const stream = { ownerClientId: 'receiver-rs', ownerRecordId: owner.recordId! };
    expect(await ownedByLiveClient(store(), TENANT, stream)).to.equal(true);
    const records = clientRecords(store(), TENANT);
    await records.update(owner.recordId!, { enabled: false });
    expect(await ownedByLiveClient(store(), TENANT, stream), 'disabled').to.equal(false);
    await records.delete(owner.recordId!);
    expect(await ownedByLiveClient(store(), TENANT, stream), 'deleted').to.equal(false);
    await saveClient(store(), 'receiver-rs');
    expect(await ownedByLiveClient(store(), TENANT, stream), 'made again').to.equal(false);
  });
});
