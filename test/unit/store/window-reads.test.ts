import { expect } from 'chai';
import { windowsReadByTurn } from '../../../src/store/index.js';
import type { WindowCount } from '../../../src/store/index.js';

/** A store's window counters that count their reads (the socket is not the subject). */
function countedWindows(counts: Record<string, number>) {
  const reads: string[][] = [];
  return {
    reads,
    addToWindow: async (key: string): Promise<WindowCount> => ({
      count: (counts[key] = (counts[key] ?? 0) + 1),
      resetAt: 0,
    }),
    readWindows: async (keys: readonly string[]) => {
      reads.push([...keys]);
      return new Map(keys.filter((key) => key in counts).map((key) => [key, { count: counts[key]!, resetAt: 0 }]));
    },
  };
}

describe('windowsReadByTurn: the failure counters asked for in one turn, read as one', () => {
  it("reads the keys of every caller of a turn with one readWindows, and answers each caller its own keys' counts", async () => {
    const store = countedWindows({ 'tenant-a': 2 });
    const windows = windowsReadByTurn(store);
    const answers = await Promise.all(
      ['tenant-a', 'tenant-b', 'tenant-a', 'tenant-c'].map((key) => windows.readWindows([key, `${key} at here`])),
    );
    expect(store.reads, 'one read').to.have.length(1);
    expect(store.reads[0]).to.have.members([
      'tenant-a',
      'tenant-a at here',
      'tenant-b',
      'tenant-b at here',
      'tenant-c',
      'tenant-c at here',
    ]);
    expect(answers.map((counts) => counts.get('tenant-a')?.count)).to.deep.equal([2, 2, 2, 2]);
    expect(answers[1]!.get('tenant-b'), 'nothing counted').to.equal(undefined);
  });

  it('reads again in a later turn, and sees a failure counted before it', async () => {
    const store = countedWindows({});
    const windows = windowsReadByTurn(store);
    expect((await windows.readWindows(['k'])).get('k')).to.equal(undefined);
    await windows.addToWindow('k', 1000);
    expect((await windows.readWindows(['k'])).get('k')?.count).to.equal(1);
    expect(store.reads).to.have.length(2);
  });
});
