import { expect } from 'chai';
import { describeStoreConformance } from './conformance.js';
import { MongoTestServer } from './mongo-server.js';

describe('MongoDB store', function () {
  const server = new MongoTestServer();

  before(async function () {
    this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
    await server.start();
    if (server.concurrencyGap) console.warn(`      (concurrency tests skipped: ${server.concurrencyGap})`);
  });

  after(async () => {
    await server.stop();
  });

  describeStoreConformance('mongodb', () => server.openStore(), {
    concurrencyUnsupported: () => server.concurrencyGap,
  });

  it('purgeExpired also covers collections this process has not declared', async () => {
    const database = server.freshDatabase();
    const writer = await server.openStore(database);
    const restarted = await server.openStore(database);
    try {
      await writer.collection('codes').insert({ id: 'a', expiresAt: Date.now() - 1000 });
      expect(await restarted.purgeExpired()).to.equal(1);
    } finally {
      await writer.close();
      await restarted.close();
    }
  });
});
