import { expect } from 'chai';
import { ProcessShares, StoreUnavailableError, type Store } from '../../../src/store/index.js';

/**
 * A process's shared counts are written by a timer, which awaits nothing. Found 2026-11-29: a
 * store that could not make the table then (SQLite: another connection's lock) threw outside the
 * write's try, an unhandled rejection that ends the process, and the batch was lost.
 */
describe('ProcessShares', function () {
  it('keeps a batch whose table the store cannot make now, for the next flush, and rejects nothing', async function () {
    let failing = true;
    const written: unknown[] = [];
    const store = {
      collection: () => {
        if (failing) throw new StoreUnavailableError('the table could not be created (locked)');
        return { upsert: async (doc: unknown) => void written.push(doc) };
      },
    } as unknown as Store;
    const shares = new ProcessShares<{ id: string; count: number }>(store, { name: 'unit_shares' });
    try {
      shares.changedShare('a', () => ({ id: 'a', count: 1 }));
      await shares.flush();
      expect(written).to.deep.equal([]);
      failing = false;
      await shares.flush();
      expect(written).to.deep.equal([{ id: 'a', count: 1 }]);
    } finally {
      await shares.close();
    }
  });
});
