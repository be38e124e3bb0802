import { expect } from 'chai';
import type { Context } from 'koa';
import { authFailureLimit, guardCredential, type FailureCounters } from '../../../src/http/auth-failures.js';

/** Counters in memory that count the reads made of them; a read answers when `release` is called. */
function countingCounters() {
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const counters: FailureCounters & { reads: number } = {
    reads: 0,
    async readWindows() {
      counters.reads += 1;
      await released;
      return new Map();
    },
    async addToWindow(_key, windowMs) {
      return { count: 1, resetAt: Date.now() + windowMs };
    },
  };
  return { counters, release: () => release() };
}

function requestFrom(ip: string): Context {
  return { ip, state: {}, status: 200 } as unknown as Context;
}

describe('auth-failure throttle: reads of the counters', function () {
  it('makes one read for the requests of one credential that check while a read of its counters is under way', async function () {
    const { counters, release } = countingCounters();
    const limit = authFailureLimit({ limit: 5, windowSeconds: 60 }, counters);
    const checks = Array.from({ length: 10 }, () => {
      const ctx = requestFrom('10.0.0.1');
      return limit(ctx, () => guardCredential(ctx, 'client t1 machine'));
    });
    release();
    await Promise.all(checks);
    expect(counters.reads).to.equal(1);
    // Another credential's counters are another read.
    const other = requestFrom('10.0.0.1');
    await limit(other, () => guardCredential(other, 'client t1 other'));
    expect(counters.reads).to.equal(2);
  });
});
