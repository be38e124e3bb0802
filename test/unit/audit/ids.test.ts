import { expect } from 'chai';
import { AuditLog } from '../../../src/audit/index.js';
import { openArbiterStore } from '../../../src/collections.js';
import type { Store } from '../../../src/store/index.js';

const entry = (n: number) => ({
  endpoint: `/e${n}`,
  method: 'GET',
  requestSummary: {},
  policyInput: null,
  policyDecision: null,
  outcome: 'allow' as const,
  tenantId: null,
  clientId: null,
  subjectId: null,
  ip: null,
  userAgent: null,
  requestId: null,
});

/** Audit ids are numbers, and the log sorts them as numbers: the 10th entry after the 9th, not between the 1st and the 2nd. */
describe('unit: audit ids sort as numbers (audit/log, SQLite store)', function () {
  let store: Store;
  let audit: AuditLog;

  before(async function () {
    store = await openArbiterStore('sqlite::memory:');
    audit = new AuditLog(store);
    for (let n = 1; n <= 12; n += 1) await audit.append(entry(n));
  });

  after(async function () {
    await audit.close();
    await store.close();
  });

  for (const direction of ['asc', 'desc'] as const) {
    it(`lists them by id ${direction} in numeric order`, async function () {
      const page = await audit.page({ filter: {}, page: 0, size: 20, sort: { field: 'id', direction } });
      const ids = page.content.map((each) => each.id);
      expect(ids.every((id) => typeof id === 'number')).to.equal(true);
      const numeric = [...ids].sort((a, b) => (direction === 'asc' ? a - b : b - a));
      expect(ids).to.deep.equal(numeric);
      const endpoints = page.content.map((each) => each.endpoint);
      expect(endpoints.indexOf('/e10') - endpoints.indexOf('/e9')).to.equal(direction === 'asc' ? 1 : -1);
    });
  }
});
