import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/index.js';
import { describeOutbox } from '../support/ssf-outbox.js';
import { MongoTestServer } from './mongo-server.js';
import { sharedPostgresTestServer } from './postgres-server.js';

/** The durable outbox (src/outbox) uses the store interface only: the same behaviour on PostgreSQL and MongoDB. */
describe('outbox (src/outbox) on PostgreSQL', function () {
  let store: Store | undefined;
  before(async function () {
    this.timeout(120_000); // initdb and the first start
    store = await openStore((await sharedPostgresTestServer()).url());
  });
  after(async function () {
    await store?.close();
  });
  describeOutbox(() => store!);
});

describe('outbox (src/outbox) on MongoDB', function () {
  const server = new MongoTestServer();
  let store: Store | undefined;
  before(async function () {
    this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
    await server.start();
    store = await server.openStore();
  });
  after(async function () {
    await store?.close();
    await server.stop();
  });
  describeOutbox(() => store!);
});
