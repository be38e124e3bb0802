import { expect } from 'chai';
import { SqliteStore } from '../../../adapters/sqlite/index.js';
import { storeSystem } from '../../../src/tracing/index.js';
import { tracedStore, type InSpan } from '../../../src/tracing/store.js';

describe('unit: the traced store passes every argument through (tracing/store)', function () {
  it("keeps a find's and a count's text search, so that a traced server's lists count what they find", async function () {
    const spans: string[] = [];
    const inSpan: InSpan = (name, _attributes, work) => {
      spans.push(name);
      return work();
    };
    const inner = await SqliteStore.open(':memory:');
    try {
      const store = tracedStore(inner, inSpan);
      const names = store.collection('names');
      await names.insert({ id: 1, name: 'Payroll' });
      await names.insert({ id: 2, name: 'Wiki' });
      const search = { fields: ['name'], text: 'ROLL' };
      expect((await names.find({}, { search })).map((doc) => doc.id)).to.deep.equal([1]);
      expect(await names.count({}, search)).to.equal(1);
      expect(spans).to.include.members(['find names', 'count names']);
    } finally {
      await inner.close();
    }
  });
});

describe('unit: the store a span names (tracing)', function () {
  // Found 2026-11-30: every store but SQLite was called mongodb, PostgreSQL too.
  it('names each store STORE_URL may name by its OpenTelemetry db.system.name', function () {
    expect(storeSystem('sqlite::memory:')).to.equal('sqlite');
    expect(storeSystem('postgres://arbiter@db/arbiter')).to.equal('postgresql');
    expect(storeSystem('postgresql://arbiter@db/arbiter')).to.equal('postgresql');
    expect(storeSystem('mongodb://db/arbiter')).to.equal('mongodb');
    expect(storeSystem('mongodb+srv://cluster.example/arbiter')).to.equal('mongodb');
  });
});
