import { expect } from 'chai';
import type { LookupAddress } from 'node:dns';
import { LookupBusyError, LookupLimiter, MAX_LOOKUPS_AT_ONCE, type LookupAll } from '../../../src/http/dns-lookups.js';

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
});
