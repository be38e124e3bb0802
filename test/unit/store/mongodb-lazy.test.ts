import { expect } from 'chai';
import { inFreshProcess } from '../../support/unit.js';

describe('unit: the MongoDB driver loaded only for a MongoDB store (adapters/mongodb)', function () {
  this.timeout(30_000);

  it('is not loaded by a process that opens a SQLite store', function () {
    const seen = inFreshProcess<boolean[]>(`
      const { openStore } = await import('./src/store/open.ts');
      const seen = [loaded('node_modules/mongodb/')];
      const store = await openStore('sqlite::memory:');
      await store.collection('lazy').insert({ id: 'a' });
      await store.close();
      seen.push(loaded('node_modules/mongodb/'));
      console.log(JSON.stringify(seen));
    `);
    expect(seen).to.deep.equal([false, false]);
  });
});
