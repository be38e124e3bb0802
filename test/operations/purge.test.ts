import { expect } from 'chai';
import { readyServer, type TestServer } from '../support/server.js';
import { loopDelays, probingLivez } from '../support/livez-probes.js';
import { AuditLog, type AuditEntry } from '../../src/audit/log.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { DEFAULT_TENANT, type StoredDoc, type TenantCollection } from '../../src/store/index.js';

/** Generous: a step of a paced purge holds the loop for a few milliseconds; one DELETE of them all held it for seconds. */
const LOOP_DELAY_BOUND_MS = 500;

async function seed<T extends StoredDoc>(
  into: TenantCollection<T>,
  count: number,
  make: (n: number) => T,
): Promise<void> {
  for (let from = 0; from < count; from += 1_000)
    await into.insertMany(Array.from({ length: Math.min(1_000, count - from) }, (_, index) => make(from + index)));
}

describe('Purges of a large backlog never stall requests', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: the purges below delete every expired record of the store.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  it('answers /livez while 30,000 expired tokens are purged, between its steps', async function () {
    const expired = 30_000;
    const tokens = server.store.collection('purge_test_tokens');
    await seed(tokens, expired, (n) => ({ id: `t${n}`, grantId: `g${n}`, expiresAt: Date.now() - 1_000 }));
    const { result, probes } = await probingLivez(server, server.store.purgeExpired(), 5);
    expect(result).to.be.at.least(expired);
    expect(probes.length, 'requests answered while the purge ran').to.be.at.least(3);
    expect(probes.every((probe) => probe.status === 200)).to.equal(true);
    expect(Math.max(...loopDelays(probes))).to.be.below(LOOP_DELAY_BOUND_MS);
  });

  it('answers /livez while 10,000 audit entries past their retention are deleted, between its steps', async function () {
    const DAY = 86_400_000;
    const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
    await seed(
      entries,
      10_000,
      (n) =>
        ({
          id: 800_000_000 + n,
          createdAt: new Date(Date.now() - 100 * DAY).toISOString(),
          endpoint: '/token',
          method: 'POST',
          tenantId: DEFAULT_TENANT,
        }) as unknown as AuditEntry,
    );
    const purge = new AuditLog(server.store).purgeOlderThan(new Date(Date.now() - 90 * DAY));
    const { result, probes } = await probingLivez(server, purge, 5);
    expect(result).to.equal(10_000);
    expect(probes.length, 'requests answered while the purge ran').to.be.at.least(3);
    expect(Math.max(...loopDelays(probes))).to.be.below(LOOP_DELAY_BOUND_MS);
  });
});
