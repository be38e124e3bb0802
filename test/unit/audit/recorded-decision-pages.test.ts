import { expect } from 'chai';
import type { AuditEntry } from '../../../src/audit/entry.js';
import { RecordedDecisionPages } from '../../../src/audit/recorded-decisions.js';
import type { TenantCollection } from '../../../src/store/index.js';

/**
 * Impact analysis reads recorded decisions a page of entries at a time. Found 2026-11-29: a filter
 * no entry matched yielded nothing to its paced consumer, and SQLite's reads settle at once, so
 * the walk over 1,000,000 entries held the event loop 3.8 s in one go.
 */
describe('Recorded decisions read a page at a time', function () {
  it('give the event loop back between pages, also when a page keeps nothing', async function () {
    let pagesRead = 0;
    const entry = (index: number) =>
      ({ id: index, createdAt: new Date(1_700_000_000_000 - index).toISOString(), endpoint: '/token' }) as AuditEntry;
    const entries = {
      find: async () =>
        pagesRead++ < 5 ? Array.from({ length: 250 }, (_, index) => entry(pagesRead * 250 + index)) : [],
    } as unknown as TenantCollection<AuditEntry>;
    let pagesWhenTheLoopRan: number | undefined;
    setImmediate(() => (pagesWhenTheLoopRan = pagesRead));
    const kept = [];
    for await (const decisions of new RecordedDecisionPages(entries, { tenantId: null, point: 'none', limit: 10 }))
      kept.push(...decisions);
    expect(kept).to.deep.equal([]);
    expect(pagesRead).to.equal(6);
    expect(pagesWhenTheLoopRan, 'the loop ran before the walk ended').to.be.below(6);
  });
});
