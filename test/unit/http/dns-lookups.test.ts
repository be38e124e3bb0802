import { expect } from 'chai';
import type { LookupAddress } from 'node:dns';
import {
  CALLER_LOOKUPS_WAITING,
  LookupBusyError,
  LookupLimiter,
  MAX_LOOKUPS_AT_ONCE,
  type LookupAll,
} from '../../../src/http/dns-lookups.js';

/**
 * Outbound DNS lookups hold one of libuv's four pool threads each for as long as the resolver
 * takes, which the same threads need for bcrypt and files (found 2026-11-29: eight lookups of
 * hosts whose DNS never answered held them all). A stand-in for getaddrinfo, whose slowness is the subject.
 */
describe('unit: outbound DNS lookups a few at a time (http/dns-lookups)', function () {
  /** A resolver that answers only when told, and counts the lookups it is asked for. */
  function heldResolver() {
    const pending = new Map<string, (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void>();
    const asked: string[] = [];
    const lookup: LookupAll = (hostname, _options, callback) => {
      asked.push(hostname);
      pending.set(hostname, callback);
    };
    const answer = (hostname: string, error: NodeJS.ErrnoException | null = null) =>
      pending.get(hostname)!(error, error ? [] : [{ address: '192.0.2.1', family: 4 }]);
    return { lookup, asked, answer, running: () => asked.filter((host) => pending.has(host)).length };
  }

  it(`runs at most ${MAX_LOOKUPS_AT_ONCE} at once; the others wait their turn, or fail once their time is up without being made`, async function () {
    const resolver = heldResolver();
    const limiter = new LookupLimiter(resolver.lookup);
    const stuck = ['a.slow.example', 'b.slow.example'].map((host) =>
      limiter.resolve(host, {}, 60_000).catch(() => null),
    );
    const waiting = limiter.resolve('idp.example', {}, 60_000);
    const givesUp = limiter.resolve('c.slow.example', {}, 50);
    expect(resolver.asked).to.deep.equal(['a.slow.example', 'b.slow.example']);
    const busy = await givesUp.catch((error: unknown) => error);
    expect(busy).to.be.instanceOf(LookupBusyError);
    expect(resolver.asked, 'the one given up was never made').not.to.include('c.slow.example');
    resolver.answer('a.slow.example', Object.assign(new Error('timeout'), { code: 'EAI_AGAIN' }));
    expect(resolver.asked).to.include('idp.example');
    resolver.answer('idp.example');
    expect(await waiting).to.deep.equal([{ address: '192.0.2.1', family: 4 }]);
    resolver.answer('b.slow.example');
    await Promise.all(stuck);
  });

  it('shares one lookup among callers of the same name, and fails a name that timed out at once for a while', async function () {
    const resolver = heldResolver();
    const limiter = new LookupLimiter(resolver.lookup);
    const both = [limiter.resolve('idp.example', {}, 1000), limiter.resolve('idp.example', {}, 1000)];
    expect(resolver.asked).to.deep.equal(['idp.example']);
    resolver.answer('idp.example');
    expect((await Promise.all(both)).map((addresses) => addresses.length)).to.deep.equal([1, 1]);

    const slow = limiter.resolve('slow.example', {}, 1000);
    resolver.answer('slow.example', Object.assign(new Error('timeout'), { code: 'EAI_AGAIN' }));
    await slow.catch(() => undefined);
    const again = await limiter.resolve('slow.example', {}, 1000).catch((error: NodeJS.ErrnoException) => error.code);
    expect(again).to.equal('EAI_AGAIN');
    expect(
      resolver.asked.filter((host) => host === 'slow.example'),
      'not asked again',
    ).to.have.length(1);

    // A name that does not exist is an answer: asked again next time.
    const missing = limiter.resolve('nowhere.example', {}, 1000);
    resolver.answer('nowhere.example', Object.assign(new Error('no such name'), { code: 'ENOTFOUND' }));
    await missing.catch(() => undefined);
    void limiter.resolve('nowhere.example', {}, 1000).catch(() => undefined);
    expect(resolver.asked.filter((host) => host === 'nowhere.example')).to.have.length(2);
    resolver.answer('nowhere.example');
  });

  // Found 2026-11-30: one anonymous /authorize a second naming a fresh host whose DNS never answers
  // (a client ID metadata document) kept every turn taken: an upstream sign-in's lookup waited its
  // whole time and failed.
  it("keeps a turn for an operator's names however many names callers give whose DNS never answers", async function () {
    const resolver = heldResolver();
    const limiter = new LookupLimiter(resolver.lookup);
    const callers = Array.from({ length: 40 }, (_, n) =>
      limiter.resolve(`r${n}.slow.example`, {}, 60_000, 'caller').catch((error: unknown) => error),
    );
    expect(resolver.running(), 'callers hold one turn').to.equal(1);
    const operator = limiter.resolve('idp.example', {}, 60_000, 'operator');
    expect(resolver.asked).to.include('idp.example');
    resolver.answer('idp.example');
    expect(await operator).to.deep.equal([{ address: '192.0.2.1', family: 4 }]);
    // Beyond the callers' waiting room, a caller's name fails at once, without a lookup.
    const settled = await Promise.race([
      Promise.all(callers.slice(1 + CALLER_LOOKUPS_WAITING)),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 1000)),
    ]);
    expect(settled)
      .to.be.an('array')
      .with.length(40 - 1 - CALLER_LOOKUPS_WAITING);
    for (const refusal of settled as unknown[]) expect(refusal).to.be.instanceOf(LookupBusyError);
    expect(resolver.asked.filter((host) => host.endsWith('.slow.example'))).to.have.length(1);
    // The waiting ones go one at a time as the caller's turn ends.
    resolver.answer('r0.slow.example', Object.assign(new Error('timeout'), { code: 'EAI_AGAIN' }));
    expect(resolver.asked.filter((host) => host.endsWith('.slow.example'))).to.deep.equal([
      'r0.slow.example',
      'r1.slow.example',
    ]);
    for (let n = 1; n <= CALLER_LOOKUPS_WAITING; n++) resolver.answer(`r${n}.slow.example`);
    await Promise.all(callers);
  });
});
