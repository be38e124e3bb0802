import { expect } from 'chai';
import fc from 'fast-check';
import { basicCredentials } from '../../../src/http/basic.js';
import { assertSingleValued } from '../../../src/http/parameters.js';
import { basic } from '../../support/oauth.js';

describe('unit: Basic client credentials (http/basic) and single-valued parameters (http/parameters)', function () {
  it('reads the form-encoded id and secret of a Basic header (RFC 6749 §2.3.1)', function () {
    expect(basicCredentials(basic('my client', 'p:a%ss'))).to.deep.equal({ id: 'my client', secret: 'p:a%ss' });
    expect(basicCredentials(`basic   ${Buffer.from('a+b:c').toString('base64')}`)).to.deep.equal({
      id: 'a b',
      secret: 'c',
    });
  });

  it('answers undefined for another scheme, and null parts for a value without a colon or with a broken escape', function () {
    expect(basicCredentials('Bearer abc')).to.equal(undefined);
    expect(basicCredentials('Basic not base64!')).to.equal(undefined);
    expect(basicCredentials(`Basic ${Buffer.from('nocolon').toString('base64')}`)).to.deep.equal({
      id: null,
      secret: null,
    });
    expect(basicCredentials(`Basic ${Buffer.from('%E0%A4%A:ok').toString('base64')}`)).to.deep.equal({
      id: null,
      secret: 'ok',
    });
  });

  it('property: whatever the id and secret, encoding then reading gives them back', function () {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (id, secret) => {
        expect(basicCredentials(basic(id, secret))).to.deep.equal({ id, secret });
      }),
    );
  });

  it('assertSingleValued refuses a name given twice with a 400 naming it, and lets distinct names pass', function () {
    expect(() => assertSingleValued('a=1&b=2&c=')).not.to.throw();
    expect(() => assertSingleValued('')).not.to.throw();
    expect(() => assertSingleValued('scope=a&resource=x&resource=y', 'form parameter'))
      .to.throw("form parameter 'resource' was given more than once")
      .with.property('status', 400);
    const long = 'n'.repeat(100);
    expect(() => assertSingleValued(`${long}=1&${long}=2`)).to.throw(`'${'n'.repeat(64)}…'`);
  });
});
