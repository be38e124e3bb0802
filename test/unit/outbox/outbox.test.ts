import { expect } from 'chai';
import { createLogger } from '../../../src/log/index.js';
import { Outbox, type OutboxOptions } from '../../../src/outbox/index.js';
import { memoryStore } from '../../support/unit.js';
import { describeOutbox } from '../../support/ssf-outbox.js';

describe('outbox (src/outbox) on SQLite', function () {
  const store = memoryStore();
  describeOutbox(store);

  it('delivers a stream behind a backlog larger than a round reads (10,000 entries) of a stream that is down, appended by another node', async function () {
    const options: OutboxOptions = { pollMs: 50, leaseMs: 2_000, backoffMs: 20, maxBackoffMs: 100, batch: 100 };
    const log = createLogger('silent');
    // Another node's appends: the delivering node learns of the streams from the store alone.
    const other = new Outbox(store(), options, log);
    await other.append(
      Array.from({ length: 10_050 }, () => ({ topic: 'backlog', stream: 'backlog:down', payload: 0 })),
    );
    await other.append([{ topic: 'backlog', stream: 'backlog:up', payload: 1 }]);
    const seen: string[] = [];
    const delivering = new Outbox(store(), options, log);
    delivering.handle('backlog', async (entry) => {
      if (entry.stream === 'backlog:down') throw new Error('receiver down');
      seen.push(entry.stream);
    });
    delivering.start();
    try {
      const deadline = Date.now() + 10_000;
      while (seen.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(seen, 'the stream that is up is served within seconds, not once the backlog is given up').to.deep.equal([
        'backlog:up',
      ]);
    } finally {
      await delivering.close();
    }
  });
});
