import { expect } from 'chai';
import { sharedOutbound } from '../../../src/http/outbound.js';

describe('the outbound client shared by every tenant provider', () => {
  const options = { allowInsecureLoopback: false, timeoutMs: 5_000, maxResponseBytes: 1_000_000 };

  it('is one client for equal options, however many tenants ask (a pair of agents, not one per tenant)', () => {
    const clients = new Set(Array.from({ length: 1_000 }, () => sharedOutbound({ ...options })));
    expect(clients.size).to.equal(1);
  });

  it('is another client for other options (the loopback exception never leaks into the guarded one)', () => {
    expect(sharedOutbound({ ...options, allowInsecureLoopback: true })).to.not.equal(sharedOutbound(options));
    expect(sharedOutbound({ ...options, timeoutMs: 1_000 })).to.not.equal(sharedOutbound(options));
  });
});
