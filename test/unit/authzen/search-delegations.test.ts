import { expect } from 'chai';
import { delegationsForResourceSearch, delegationsOnResource } from '../../../src/authzen/evaluate.js';
import { StoreUnavailableError, type Store } from '../../../src/store/index.js';

/**
 * A search's delegations are read at its first candidate. Found 2026-11-29: they were read at
 * once, and a search with no candidate never awaited the read, so a store fault was an unhandled
 * rejection, which ends the process.
 */
describe('The delegations of an AuthZEN search', function () {
  const failing = {
    collection: () => ({
      find: async () => {
        throw new StoreUnavailableError('a fault injected by the test');
      },
    }),
  } as unknown as Store;

  it('are not read, and so cannot fail unawaited, while no candidate asks for them', async function () {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      delegationsForResourceSearch(failing, 't', 'alice');
      delegationsOnResource(failing, 't', 'plan');
      // A rejection left unhandled is reported once the microtasks of its turn are done.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('unhandledRejection', listener);
    }
    expect(unhandled).to.deep.equal([]);
  });

  it('fail at the candidate that asks, as the store did', async function () {
    const search = delegationsForResourceSearch(failing, 't', 'alice');
    let refused: unknown;
    await search('alice', 'plan').catch((error: unknown) => (refused = error));
    expect(refused).to.be.instanceOf(StoreUnavailableError);
  });
});
