import { expect } from 'chai';
import {
  SandboxBusyError,
  SandboxJobError,
  SandboxLimitError,
  WorkerPool,
  type PoolLimits,
} from '../../../src/policy/sandbox/pool.js';

/**
 * A stub thread speaking the pool's protocol: `{ spin: ms }` keeps its loop busy that long (a
 * job that cannot be interrupted but by ending the thread), `{ allocate: true }` fills its heap
 * without bound, `{ fail: text }` fails, `{ recycle: true }` asks to be replaced; any job answers
 * with the thread's id, so that a test sees which thread took it.
 */
const STUB = `
const { parentPort, threadId } = require('node:worker_threads');
parentPort.on('message', ({ id, job }) => {
  if (job.fail) return parentPort.postMessage({ id, error: job.fail });
  if (job.spin) { const end = Date.now() + job.spin; while (Date.now() < end); }
  if (job.allocate) { const kept = []; for (;;) kept.push(new Array(1e5).fill({ a: kept.length })); }
  parentPort.postMessage({ id, result: threadId, recycle: job.recycle === true });
});
parentPort.postMessage({ ready: true });
`;

const LIMITS: PoolLimits = { timeoutMs: 1000, memoryMb: 32, threads: 1, maxQueued: 2 };

describe('unit: the policy sandbox’s worker threads (policy/sandbox/pool)', function () {
  this.timeout(30_000);
  let pool: WorkerPool;

  const make = (limits: Partial<PoolLimits> = {}) =>
    (pool = new WorkerPool(
      { module: STUB, eval: true },
      { ...LIMITS, ...limits },
      {
        timeoutMs: 'TIMEOUT',
        memoryMb: 'MEMORY',
      },
    ));

  afterEach(async function () {
    await pool?.close();
  });

  it('runs jobs in a thread it keeps: the same thread answers one job after another', async function () {
    make();
    const first = await pool.run<number>({});
    expect(await pool.run<number>({})).to.equal(first);
    expect(pool.threads).to.equal(1);
  });

  it('ends a job past its time limit with a limit error naming the setting, and a new thread takes the next job', async function () {
    make();
    const first = await pool.run<number>({});
    const started = performance.now();
    const error = await pool.run({ spin: 60_000 }).catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(SandboxLimitError);
    expect(error).to.include({ limit: 'time' });
    expect((error as Error).message).to.contain('TIMEOUT=1000');
    // Ended at the limit, not when the job would have finished.
    expect(performance.now() - started).to.be.lessThan(10_000);
    const next = await pool.run<number>({});
    expect(next).to.be.a('number').and.not.equal(first);
  });

  it('ends a thread whose heap outgrows the memory limit with a limit error, and replaces it', async function () {
    make({ timeoutMs: 20_000 });
    const error = await pool.run({ allocate: true }).catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(SandboxLimitError);
    expect(error).to.include({ limit: 'memory' });
    expect((error as Error).message).to.contain('MEMORY=32');
    expect(await pool.run<number>({})).to.be.a('number');
  });

  it('runs at most `threads` jobs at once, the others in order after them', async function () {
    make({ threads: 2, maxQueued: 4, timeoutMs: 5000 });
    const order: number[] = [];
    const jobs = [0, 1, 2, 3].map((index) => pool.run({ spin: 300 }).then(() => order.push(index)));
    await Promise.all(jobs);
    expect(pool.threads).to.equal(2);
    expect(order.slice(2).sort()).to.deep.equal([2, 3]);
  });

  it('refuses a job beyond the queue as busy (503, with a retry time), and keeps running the others', async function () {
    make({ maxQueued: 1, timeoutMs: 5000 });
    await pool.run({});
    // The thread is ready: this job runs at once, the next waits, the third finds the queue full.
    const running = pool.run({ spin: 500 });
    const queued = pool.run({});
    const refused = await pool.run({}).catch((caught: unknown) => caught);
    expect(refused).to.be.instanceOf(SandboxBusyError);
    expect(refused).to.include({ status: 503, retryAfterSeconds: 5 });
    await running;
    expect(await queued).to.be.a('number');
  });

  it('gives a job that waited longer than three time limits up as busy', async function () {
    make({ timeoutMs: 1000, maxQueued: 10 });
    await pool.run({});
    // Each job takes 600 ms, well within the limit on a loaded machine too: the first three wait at
    // most 1,200 ms, the seventh would wait 3,600 ms, more than three limits (3,000 ms).
    const answers = await Promise.all(
      [0, 1, 2, 3, 4, 5, 6].map(() => pool.run({ spin: 600 }).catch((caught: unknown) => caught)),
    );
    for (const answer of answers.slice(0, 3)) expect(answer).to.be.a('number');
    expect(answers[6]).to.be.instanceOf(SandboxBusyError);
    expect((answers[6] as Error).message).to.contain('no policy thread was free within 3000 ms');
  });

  it('passes a job’s own error on as a job error, and replaces a thread that asks to be', async function () {
    make();
    const error = await pool.run({ fail: 'no such policy' }).catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(SandboxJobError);
    expect((error as Error).message).to.equal('no such policy');
    const recycled = await pool.run<number>({ recycle: true });
    expect(await pool.run<number>({})).to.not.equal(recycled);
  });
});
