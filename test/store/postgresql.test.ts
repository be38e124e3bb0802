import { openStore } from '../../src/store/open.js';
import { describeStoreConformance } from './conformance.js';
import { sharedPostgresTestServer, type PostgresTestServer } from './postgres-server.js';

describe('PostgreSQL store', function () {
  let server: PostgresTestServer;

  before(async function () {
    this.timeout(120_000); // initdb and the first start
    server = await sharedPostgresTestServer();
  });

  // A schema of its own per test, with only the collections the test declares.
  describeStoreConformance('postgresql', () => openStore(server.url()));
});
