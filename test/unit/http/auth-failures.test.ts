import { expect } from 'chai';
import type { Context } from 'koa';
import {
  authFailureLimit,
  credentialWasRight,
  guardCredential,
  type FailureCounters,
} from '../../../src/http/auth-failures.js';

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

/** Counters in memory, as the store keeps them, each read and write taking `latencyMs` (a store across a network). */
function slowCounters(latencyMs: number): FailureCounters {
  const windows = new Map<string, { count: number; resetAt: number }>();
  const later = () => new Promise((resolve) => setTimeout(resolve, latencyMs));
  return {
    async addToWindow(key, windowMs, amount = 1) {
      await later();
      const window = windows.get(key) ?? { count: 0, resetAt: Date.now() + windowMs };
      window.count += amount;
      windows.set(key, window);
      return { ...window };
    },
    async readWindows(keys) {
      await later();
      return new Map(keys.flatMap((key) => (windows.has(key) ? [[key, { ...windows.get(key)! }] as const] : [])));
    },
  };
}

/** A request that presents a client secret (Basic), as the limiter sees it. */
function presentingFrom(ip: string): Context {
  return {
    ip,
    state: {},
    status: 200,
    query: {},
    get: (name: string) => (name === 'authorization' ? 'Basic Z3Vlc3M6d3Jvbmc=' : ''),
    set() {},
  } as unknown as Context;
}

describe('auth-failure throttle: guesses sent at once', function () {
  // Found 2026-11-30: the counts were read before the verification and written after it, so every
  // guess of a burst was verified before the first failure was counted.
  it('verifies at most the limit of one credential’s guesses sent at once, whatever the store’s latency', async function () {
    const limit = authFailureLimit({ limit: 5, windowSeconds: 60 }, slowCounters(20));
    let verified = 0;
    const guesses = Array.from({ length: 40 }, async () => {
      const ctx = presentingFrom('10.0.0.9');
      await limit(ctx, async () => {
        try {
          await guardCredential(ctx, 'client t1 guessed');
        } catch (refusal) {
          ctx.status = (refusal as { status: number }).status;
          return;
        }
        verified += 1;
        await new Promise((resolve) => setTimeout(resolve, 5));
        ctx.status = 401;
      });
      return ctx.status;
    });
    const statuses = await Promise.all(guesses);
    expect(verified).to.equal(5);
    expect(statuses.filter((status) => status === 401)).to.have.length(5);
    expect(statuses.filter((status) => status === 429)).to.have.length(35);
  });

  it('lets every request of a burst with the right credential through, one limit of verifications at a time', async function () {
    const limit = authFailureLimit({ limit: 2, windowSeconds: 60 }, slowCounters(5));
    let underWay = 0;
    let most = 0;
    const requests = Array.from({ length: 20 }, async () => {
      const ctx = presentingFrom('10.0.0.10');
      await limit(ctx, async () => {
        await guardCredential(ctx, 'client t1 busy');
        underWay += 1;
        most = Math.max(most, underWay);
        await new Promise((resolve) => setTimeout(resolve, 2));
        underWay -= 1;
        credentialWasRight(ctx);
        ctx.status = 200;
      });
      return ctx.status;
    });
    expect(await Promise.all(requests)).to.deep.equal(Array(20).fill(200));
    expect(most).to.equal(2);
  });

  it('does not keep a request that names its credential twice waiting for its own turn', async function () {
    const limit = authFailureLimit({ limit: 1, windowSeconds: 60 }, slowCounters(1));
    const ctx = presentingFrom('10.0.0.11');
    const started = Date.now();
    await limit(ctx, async () => {
      await guardCredential(ctx, 'client t1 twice');
      await guardCredential(ctx, 'client t1 twice');
      credentialWasRight(ctx);
      ctx.status = 200;
    });
    expect(ctx.status).to.equal(200);
    expect(Date.now() - started).to.be.below(1000);
    // And its turn ended once: the next request of the credential is verified at once.
    const next = presentingFrom('10.0.0.11');
    await limit(next, async () => {
      await guardCredential(next, 'client t1 twice');
      next.status = 200;
    });
    expect(next.status).to.equal(200);
    expect(Date.now() - started).to.be.below(1000);
  });
});
