import { expect } from 'chai';
import type { Context } from 'koa';
import type { PolicyEngine } from '../../../src/policy/index.js';
import { health } from '../../../src/probes.js';
import type { Store } from '../../../src/store/index.js';

/** A store and a policy that count what the probes ask of them, answering a little later (as over a network). */
function countingDependencies() {
  const asked = { writes: 0, opa: 0 };
  const later = () => new Promise((resolve) => setTimeout(resolve, 10));
  const store = {
    ping: async () => later(),
    addToWindow: async () => {
      asked.writes += 1;
      await later();
      return { count: 1, resetAt: Date.now() + 1000 };
    },
  } as unknown as Store;
  const policy = {
    isReady: async () => {
      asked.opa += 1;
      await later();
      return true;
    },
    revisions: async () => ({ store: 'r1', opa: 'r1', inProcess: 'r1' }),
    policyFaults: async () => [],
  } as unknown as PolicyEngine;
  return { store, policy, asked };
}

const probeAt = (path: string) =>
  ({ method: 'GET', path, status: 404, body: undefined, set() {} }) as unknown as Context;

describe('unit: the readiness and health probes (probes.ts)', function () {
  // Found 2026-11-30: the probes are open to anyone, and each one wrote to the store and asked OPA.
  it('answers the probes under way at once from one round of checks: one store write for 50', async function () {
    const { store, policy, asked } = countingDependencies();
    const probe = health(store, policy, 10);
    const probes = Array.from({ length: 50 }, (_, n) => probeAt(n % 2 ? '/readyz' : '/healthz'));
    await Promise.all(probes.map((ctx) => probe(ctx)));
    expect(probes.map((ctx) => ctx.status)).to.deep.equal(Array(50).fill(200));
    expect(asked).to.deep.equal({ writes: 1, opa: 1 });
    // A probe that comes after a round ended makes a round of its own.
    const after = probeAt('/readyz');
    await probe(after);
    expect(after.status).to.equal(200);
    expect(asked).to.deep.equal({ writes: 2, opa: 2 });
  });
});
