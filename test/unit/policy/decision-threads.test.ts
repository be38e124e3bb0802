import { expect } from 'chai';
import { CedarDriver } from '../../../src/policy/cedar/driver.js';
import type { PolicySnapshot } from '../../../src/policy/bundle/build.js';
import type { DecisionInput } from '../../../src/policy/index.js';
import { CHEAP_MS, LiveDecisions } from '../../../src/policy/live/index.js';
import { DecisionThreads, type ThreadEntry } from '../../../src/policy/live/pool.js';
import { createLogger } from '../../../src/log/index.js';

/**
 * A stand-in for thread.ts that speaks its protocol: each input is answered with a Cedar failure
 * "from a thread" (so that a test tells it from an evaluation on the event loop), the revisions it
 * was sent, and the time the input names (`ms`); an input with `spin` never ends, one with `busyMs`
 * holds its thread that long.
 */
const STUB_THREAD: ThreadEntry = {
  module: new URL(
    `data:text/javascript,${encodeURIComponent(`
      import { parentPort } from 'node:worker_threads';
      const loaded = [];
      parentPort.on('message', (job) => {
        if (job.load) loaded.push(job.load.key + (job.load.snapshot.data.length ? ' with its data entries' : ''));
        job.inputs.forEach((input, index) => {
          if (input.spin) for (;;);
          if (input.busyMs) { const until = Date.now() + input.busyMs; while (Date.now() < until); }
          parentPort.postMessage({
            id: job.id, index, ms: input.ms ?? 0.1,
            rego: null, cedar: { kind: 'failed', reason: 'from a thread: ' + loaded.join(',') },
          });
        });
      });
      parentPort.postMessage({ ready: true });
    `)}`,
  ),
  execArgv: [],
};

const SNAPSHOT: PolicySnapshot = { revision: 'r1', rules: [], data: [], mergedData: {}, skipped: [] };
const log = createLogger('silent');

const input = (clientId: string, extra: Record<string, unknown> = {}) =>
  ({
    tenant: '_default',
    client: { client_id: clientId },
    subject: null,
    request: { endpoint: '/token' },
    time: '2026-01-01T00:00:00Z',
    ...extra,
  }) as unknown as DecisionInput;

const payload =
  (key = 'r1') =>
  () => ({ key, snapshot: SNAPSHOT });

/** Polls until `condition` holds (threads start and stop asynchronously). */
async function until(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('Decision threads', function () {
  this.timeout(30_000);
  let threads: DecisionThreads;

  beforeEach(function () {
    threads = new DecisionThreads(STUB_THREAD, 2);
    threads.warm();
  });
  afterEach(async function () {
    await threads.close();
  });

  it('decides every input of a job in order, and sends a revision to a thread once', async function () {
    const first = await threads.run('r1', payload(), 'token', [input('a'), input('b')], Date.now() + 5000);
    expect(first.failure).to.equal(undefined);
    expect(first.items.map((item) => item.index)).to.deep.equal([0, 1]);
    const again = await threads.run('r1', payload(), 'token', [input('a')], Date.now() + 5000);
    expect(again.items[0]!.cedar).to.deep.include({ reason: 'from a thread: r1' });
  });

  it('ends a job past its deadline with the inputs decided before it, and replaces the thread', async function () {
    await until(() => threads.started);
    const started = Date.now();
    const outcome = await threads.run(
      'r1',
      payload(),
      'token',
      [input('a'), input('b', { spin: true }), input('c')],
      Date.now() + 300,
    );
    expect(Date.now() - started).to.be.below(1500);
    expect(outcome.items.map((item) => item.index)).to.deep.equal([0]);
    expect(outcome.failure).to.deep.equal({
      reason: 'its evaluation ran out of time',
      overBudget: true,
      running: true,
    });
    // The terminated thread is replaced by one thread (the kept one), not left missing until the next job.
    await until(() => threads.threads === 1);
    const next = await threads.run('r1', payload(), 'token', [input('d')], Date.now() + 10_000);
    expect(next.failure).to.equal(undefined);
  });

  it('keeps one thread while idle, starts another when every thread is busy, and lets it go once idle', async function () {
    const IDLE_MS = 300;
    const pool = new DecisionThreads(STUB_THREAD, 2, undefined, IDLE_MS);
    pool.warm();
    try {
      await until(() => pool.started);
      expect(pool.threads, 'one thread kept ahead of need').to.equal(1);
      await pool.run('r1', payload(), 'token', [input('a')], Date.now() + 5000);
      expect(pool.threads, 'a job that finds a free thread starts none').to.equal(1);
      const busy = pool.run('r1', payload(), 'token', [input('slow', { busyMs: 1500 })], Date.now() + 10_000);
      const meanwhile = await pool.run('r1', payload(), 'token', [input('b')], Date.now() + 10_000);
      expect(meanwhile.failure).to.equal(undefined);
      expect(meanwhile.items[0]!.cedar, 'decided by a second thread while the first is busy').to.deep.include({
        reason: 'from a thread: r1',
      });
      expect(pool.threads).to.equal(2);
      expect((await busy).failure).to.equal(undefined);
      await until(() => pool.threads === 1, 5000);
      const after = await pool.run('r1', payload(), 'token', [input('c')], Date.now() + 5000);
      expect(after.failure, 'the kept thread still decides').to.equal(undefined);
    } finally {
      await pool.close();
    }
  });

  it('fails a job that waited past its deadline for a thread, without ending any', async function () {
    const single = new DecisionThreads(STUB_THREAD, 1);
    single.warm();
    try {
      await until(() => single.started);
      const spinning = single.run('r1', payload(), 'token', [input('a', { spin: true })], Date.now() + 600);
      const waiting = await single.run('r1', payload(), 'token', [input('b')], Date.now() + 200);
      expect(waiting.failure).to.deep.equal({
        reason: 'no decision thread was free in time',
        overBudget: true,
        running: false,
      });
      expect((await spinning).failure?.running).to.equal(true);
    } finally {
      await single.close();
    }
  });
});

describe('Live decisions: on the event loop only while proven cheap', function () {
  this.timeout(30_000);
  let live: LiveDecisions;
  const BUDGET_MS = 400;

  beforeEach(async function () {
    live = new LiveDecisions({ budgetMs: BUDGET_MS, cedar: new CedarDriver(), log, threads: 2, entry: STUB_THREAD });
    await until(() => (live as unknown as { threads: DecisionThreads }).threads.started);
  });
  afterEach(async function () {
    await live.close();
  });

  const decide = (...inputs: DecisionInput[]) => live.evaluate(SNAPSHOT, null, 'token', inputs, Date.now() + BUDGET_MS);
  const fromThread = (verdicts: { cedar: { kind: string } }) => verdicts.cedar.kind === 'failed';

  it("measures a key's first decision in a thread, then decides it on the event loop", async function () {
    expect(fromThread((await decide(input('a')))[0]!)).to.equal(true);
    const [second] = await decide(input('a'));
    expect(second).to.deep.equal({ rego: null, cedar: { kind: 'none' } });
  });

  it(`keeps a key whose evaluation took more than ${CHEAP_MS} ms in the threads`, async function () {
    await decide(input('slow', { ms: CHEAP_MS + 1 }));
    expect(fromThread((await decide(input('slow', { ms: CHEAP_MS + 1 })))[0]!)).to.equal(true);
  });

  it('forgets the least recently used key once it remembers as many as it may, not every key', async function () {
    await live.close();
    live = new LiveDecisions({ budgetMs: BUDGET_MS, cedar: new CedarDriver(), log, entry: STUB_THREAD, maxKeys: 3 });
    await until(() => (live as unknown as { threads: DecisionThreads }).threads.started);
    for (const client of ['a', 'b', 'c', 'b', 'd']) await decide(input(client));
    expect(fromThread((await decide(input('b')))[0]!), 'b: used lately, still known').to.equal(false);
    expect(fromThread((await decide(input('a')))[0]!), 'a: the least recently used, forgotten').to.equal(true);
  });

  it('sends a thread the merged data and the rules of a revision, not its data entries again', async function () {
    const withData = {
      ...SNAPSHOT,
      revision: 'r-data',
      data: [{ dataKey: 'big', value: 'x'.repeat(1024) }],
      mergedData: { big: 'x'.repeat(1024) },
    } as unknown as PolicySnapshot;
    const [verdicts] = await live.evaluate(withData, null, 'token', [input('data')], Date.now() + BUDGET_MS);
    expect(verdicts!.cedar).to.deep.include({ reason: 'from a thread: r-data' });
  });

  it('measures a larger input of the same client anew', async function () {
    await decide(input('a'));
    expect(fromThread((await decide(input('a', { padding: 'x'.repeat(4096) })))[0]!)).to.equal(true);
  });

  it('fails a decision past the budget closed, naming the point and the limit, and the next ones at once', async function () {
    const overrun = (await decide(input('hog', { spin: true })))[0]!;
    expect(overrun.rego).to.deep.include({
      kind: 'failed',
      policyFault: true,
      description: `the token policy decision did not complete within ${BUDGET_MS} ms; try again later`,
    });
    expect((overrun.rego as { reason: string }).reason).to.contain(
      `the token decision did not complete within POLICY_DECISION_TIMEOUT_MS (${BUDGET_MS} ms)`,
    );
    const started = Date.now();
    const paused = (await decide(input('hog', { spin: true })))[0]!;
    expect(Date.now() - started, 'refused without waiting').to.be.below(100);
    expect((paused.rego as { reason: string }).reason).to.contain('refused for a while');
  });

  it('keeps the verdicts a batch decided before its costly input, and fails the rest without blaming them', async function () {
    const verdicts = await decide(input('b1'), input('b-hog', { spin: true }), input('b3'));
    expect(fromThread(verdicts[0]!)).to.equal(true);
    expect(verdicts[1]!.rego).to.deep.include({ policyFault: true });
    expect(verdicts[2]!.rego).to.not.have.property('policyFault');
    expect((verdicts[2]!.rego as { reason: string }).reason).to.contain('another decision of its batch');
    // b3 was not blamed: its next decision is measured in a thread, not refused.
    expect(fromThread((await decide(input('b3')))[0]!)).to.equal(true);
  });
});
