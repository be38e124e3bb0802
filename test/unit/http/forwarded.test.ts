import { expect } from 'chai';
import type { Context } from 'koa';
import { limitedAddress, trustedCaller } from '../../../src/http/forwarded.js';

/** The little of a Koa context the middleware reads: the socket's peer, the headers, and Koa's own idea of the address. */
function contextFrom(remoteAddress: string, headers: Record<string, string>, koaIp = remoteAddress) {
  const ctx = { req: { socket: { remoteAddress }, headers: { ...headers } }, request: { ip: '' }, ip: koaIp };
  return ctx as unknown as Context & typeof ctx;
}

const FORWARDED = {
  forwarded: 'for=203.0.113.9',
  'x-forwarded-for': '203.0.113.9',
  'x-forwarded-proto': 'https',
  'x-forwarded-host': 'evil.test',
  'x-forwarded-port': '443',
  'x-real-ip': '203.0.113.9',
  accept: 'application/json',
};

describe('unit: forwarded headers are believed only from trusted proxies (http/forwarded)', function () {
  it('strips every forwarded header from an untrusted peer and takes the peer address, IPv4-mapped written as IPv4', async function () {
    const ctx = contextFrom('::ffff:198.51.100.7', FORWARDED);
    trustedCaller(['10.0.0.0/8'])(ctx);
    expect(ctx.req.headers).to.deep.equal({ accept: 'application/json' });
    expect(ctx.request.ip).to.equal('198.51.100.7');
  });

  it('keeps them from a proxy inside a trusted range, and writes the address Koa took from them in one spelling', async function () {
    const ctx = contextFrom('10.1.2.3', FORWARDED, '::ffff:203.0.113.9');
    trustedCaller(['10.0.0.0/8'])(ctx);
    expect(ctx.req.headers).to.deep.equal(FORWARDED);
    expect(ctx.request.ip).to.equal('203.0.113.9');
  });

  it('trusts a single address entry exactly, IPv6 included, and nobody when none is configured', async function () {
    for (const [proxies, peer, trusted] of [
      [['127.0.0.50'], '127.0.0.50', true],
      [['127.0.0.50'], '127.0.0.51', false],
      [['::1'], '::1', true],
      [['2001:db8::/32'], '2001:db8::7', true],
      [['2001:db8::/32'], '2001:db9::7', false],
      [[], '127.0.0.1', false],
    ] as const) {
      const ctx = contextFrom(peer, FORWARDED);
      trustedCaller([...proxies])(ctx);
      expect('x-forwarded-for' in ctx.req.headers, `${peer} against ${proxies.join(',')}`).to.equal(trusted);
    }
  });

  it('takes a request as https under an https issuer unless a trusted proxy says otherwise', async function () {
    const untrusted = contextFrom('198.51.100.7', { 'x-forwarded-proto': 'http' });
    trustedCaller(['10.0.0.0/8'], [], true)(untrusted);
    expect(untrusted.req.headers).to.deep.equal({ 'x-forwarded-proto': 'https' });
    const saysHttp = contextFrom('10.1.2.3', { 'x-forwarded-proto': 'http' });
    trustedCaller(['10.0.0.0/8'], [], true)(saysHttp);
    expect(saysHttp.req.headers).to.deep.equal({ 'x-forwarded-proto': 'http' });
    const saysNothing = contextFrom('10.1.2.3', {});
    trustedCaller(['10.0.0.0/8'], [], true)(saysNothing);
    expect(saysNothing.req.headers).to.deep.equal({ 'x-forwarded-proto': 'https' });
    const httpIssuer = contextFrom('198.51.100.7', {});
    trustedCaller(['10.0.0.0/8'])(httpIssuer);
    expect(httpIssuer.req.headers).to.deep.equal({});
  });

  it("believes the proxy's client certificate header (MTLS_CERTIFICATE_HEADER) from a trusted proxy alone", async function () {
    const headers = { 'x-ssl-client-cert': 'PEM', accept: 'application/json' };
    const untrusted = contextFrom('198.51.100.7', headers);
    trustedCaller(['10.0.0.0/8'], ['X-SSL-Client-Cert'])(untrusted);
    expect(untrusted.req.headers).to.deep.equal({ accept: 'application/json' });
    const trusted = contextFrom('10.1.2.3', headers);
    trustedCaller(['10.0.0.0/8'], ['X-SSL-Client-Cert'])(trusted);
    expect(trusted.req.headers).to.deep.equal(headers);
  });

  it('counts an IPv4 address as it is and an IPv6 one by its /64, however it is spelled', function () {
    expect(limitedAddress('198.51.100.7')).to.equal('198.51.100.7');
    const prefix = '2001:db8:1:2::/64';
    for (const address of [
      '2001:db8:1:2::1',
      '2001:db8:1:2::10',
      '2001:DB8:1:2:ffff:ffff:ffff:ffff',
      '2001:0db8:0001:0002::9',
    ])
      expect(limitedAddress(address), address).to.equal(prefix);
    expect(limitedAddress('2001:db8:1:3::1')).to.equal('2001:db8:1:3::/64');
    expect(limitedAddress('::1')).to.equal('0:0:0:0::/64');
    expect(limitedAddress('not an address')).to.equal('not an address');
  });
});
