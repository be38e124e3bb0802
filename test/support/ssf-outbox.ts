import { expect } from 'chai';
import { createLogger } from '../../src/log/index.js';
import { Outbox, type OutboxEntry, type OutboxOptions } from '../../src/outbox/index.js';
import type { Store } from '../../src/store/index.js';

const FAST: OutboxOptions = { pollMs: 50, leaseMs: 2_000, backoffMs: 20, maxBackoffMs: 100, batch: 100 };
const log = createLogger('silent');

/** Resolves once `done()` holds, looking every few milliseconds (the test's timeout bounds it). */
async function until(done: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await done())) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** The outbox's behaviour on a store; run on SQLite (test/unit/outbox) and PostgreSQL and MongoDB (test/store/outbox.test.ts). */
export function describeOutbox(store: () => Store): void {
  let outboxes: Outbox[] = [];
  const outbox = (topic: string, handler: (entry: OutboxEntry) => Promise<void>) => {
    const made = new Outbox(store(), FAST, log);
    made.handle(topic, handler);
    outboxes.push(made);
    return made;
  };
  afterEach(async function () {
    await Promise.all(outboxes.map((each) => each.close()));
    outboxes = [];
  });

  it('delivers every entry once, in order per stream, and keeps none', async function () {
    const seen: string[] = [];
    const box = outbox('order', async (entry) => void seen.push(`${entry.stream}:${entry.payload as number}`));
    await box.append([1, 2, 3].map((n) => ({ topic: 'order', stream: n % 2 ? 'a' : 'b', payload: n })));
    await box.append([{ topic: 'order', stream: 'a', payload: 4 }]);
    box.start();
    await until(() => seen.length === 4);
    expect(seen.filter((each) => each.startsWith('a:'))).to.deep.equal(['a:1', 'a:3', 'a:4']);
    // An entry is deleted once its handler has returned: the last deletion may follow the last delivery.
    await until(async () => (await box.state()).pending === 0);
    expect(seen, 'each delivered once').to.have.length(4);
  });

  it('retries a failing entry with back-off and holds the stream behind it, not the others', async function () {
    const seen: number[] = [];
    let refusals = 2;
    const box = outbox('retry', async (entry) => {
      if (entry.payload === 1 && refusals > 0) {
        refusals -= 1;
        throw new Error('receiver down');
      }
      seen.push(entry.payload as number);
    });
    await box.append([
      { topic: 'retry', stream: 's', payload: 1 },
      { topic: 'retry', stream: 's', payload: 2 },
      { topic: 'retry', stream: 'other', payload: 3 },
    ]);
    box.start();
    await until(() => seen.includes(3));
    expect(seen).to.deep.equal([3]);
    const failing = await box.state();
    expect(failing.failing).to.equal(1);
    await until(() => seen.length === 3);
    expect(seen).to.deep.equal([3, 1, 2]);
  });

  it('goes on past a stream that fails, however many entries it holds back', async function () {
    const seen: string[] = [];
    const box = outbox('dead', async (entry) => {
      if (entry.stream === 'dead') throw new Error('receiver down');
      seen.push(entry.stream);
    });
    await box.append(Array.from({ length: 250 }, () => ({ topic: 'dead', stream: 'dead', payload: 0 })));
    await box.append([{ topic: 'dead', stream: 'alive', payload: 1 }]);
    box.start();
    await until(() => seen.length === 1);
    expect(seen).to.deep.equal(['alive']);
  });

  it('is delivered by one node at a time: the lease holder; the other takes over once the lease is given up', async function () {
    const seen: string[] = [];
    const first = outbox('lease', async (entry) => void seen.push(`first:${entry.payload as number}`));
    const second = outbox('lease', async (entry) => void seen.push(`second:${entry.payload as number}`));
    first.start();
    while (!(await first.state()).leader) await new Promise((resolve) => setTimeout(resolve, 5));
    second.start();
    await second.append([1, 2].map((n) => ({ topic: 'lease', stream: 's', payload: n })));
    await until(() => seen.length === 2);
    expect(seen).to.deep.equal(['first:1', 'first:2']);
    expect((await second.state()).leader).to.equal(false);
    await first.close();
    await second.append([{ topic: 'lease', stream: 's', payload: 3 }]);
    await until(() => seen.length === 3);
    expect(seen[2]).to.equal('second:3');
  });
}
