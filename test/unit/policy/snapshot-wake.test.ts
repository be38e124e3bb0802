import { expect } from 'chai';
import { openArbiterStore } from '../../../src/collections.js';
import { PolicySnapshots } from '../../../src/policy/bundle/snapshots.js';
import type { Store } from '../../../src/store/index.js';
import { log, putData } from '../../policy/support.js';

/** Resolves to what settled first: the promise ('woken') or the timer ('timed out'). */
function firstOf(promise: Promise<unknown>, ms: number): Promise<'woken' | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), ms)));
  return Promise.race([promise.then(() => 'woken' as const), timeout]).finally(() => clearTimeout(timer));
}

describe('unit: the policy snapshot on SQLite (policy/bundle/snapshots)', function () {
  let store: Store;
  let snapshots: PolicySnapshots;

  beforeEach(async function () {
    store = await openArbiterStore('sqlite::memory:');
    snapshots = new PolicySnapshots(store, log);
  });

  afterEach(async function () {
    await store.close();
  });

  it("wakes the bundle's held requests at once on a policy write of this process, not at their next look", async function () {
    const before = await snapshots.current();
    // A held request looks again after its interval (here 10 s) unless a write wakes it.
    const held = snapshots.nextChange(10_000);
    await putData(store, 'wake_probe', { at: 1 });
    expect(await firstOf(held, 2000)).to.equal('woken');
    expect((await snapshots.current()).revision).to.not.equal(before.revision);
  });

  it('is not woken by writes to other records', async function () {
    await snapshots.current();
    const held = snapshots.nextChange(10_000);
    await store.collection('clients').insert({ id: 'not-policy', clientId: 'not-policy' });
    expect(await firstOf(held, 300)).to.equal('timed out');
  });
});
