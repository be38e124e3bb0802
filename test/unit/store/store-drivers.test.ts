import { expect } from 'chai';
import { inFreshProcess } from '../../support/unit.js';

describe('unit: a store driver is loaded only for its store (adapters/mongodb, adapters/postgresql)', function () {
  this.timeout(30_000);

  it('neither the MongoDB nor the PostgreSQL driver is loaded by a process that opens a SQLite store', function () {
    const seen = inFreshProcess<boolean[][]>(`
      const drivers = () => [loaded('node_modules/mongodb/'), loaded('node_modules/pg/')];
      const { openStore } = await import('./src/store/open.ts');
      const seen = [drivers()];
      const store = await openStore('sqlite::memory:');
      await store.collection('lazy').insert({ id: 'a' });
      await store.close();
      seen.push(drivers());
      console.log(JSON.stringify(seen));
    `);
    expect(seen).to.deep.equal([
      [false, false],
      [false, false],
    ]);
  });
});
