import { expect } from 'chai';
import fc from 'fast-check';
import { isSharedPart, joinShared, splitShared } from '../../../src/policy/index.js';

describe('unit: the part many inputs share, written once (policy/shared-part)', function () {
  it('takes out the fields equal in every input, compared as JSON, and leaves each input the rest', function () {
    const client = { id: 'app', scopes: ['read'] };
    const inputs = [
      { tenant: 't', client, resource: 'a', time: '1' },
      { tenant: 't', client: { id: 'app', scopes: ['read'] }, resource: 'b', time: '1' },
    ];
    expect(splitShared(inputs)).to.deep.equal({
      common: { tenant: 't', client, time: '1' },
      items: [{ resource: 'a' }, { resource: 'b' }],
    });
  });

  it('tells apart values that differ deep inside, however large the part they share', function () {
    const context = { big: Array.from({ length: 1000 }, (_, index) => index) };
    const evaluation = (id: string, extra: object = {}) => ({ resource: { type: 'doc', id }, context, ...extra });
    const inputs = [{ evaluation: evaluation('1') }, { evaluation: evaluation('1') }, { evaluation: evaluation('2') }];
    expect(splitShared(inputs).common).to.deep.equal({});
    const same = [{ evaluation: evaluation('1') }, { evaluation: { ...evaluation('1'), context: { ...context } } }];
    expect(splitShared(same).common).to.have.property('evaluation');
    expect(splitShared([{ a: [1, 2] }, { a: [1, 2, 3] }, { a: { 0: 1, 1: 2 } }]).common).to.deep.equal({});
  });

  it('shares nothing a single input lacks, and splits no inputs into nothing', function () {
    expect(splitShared([{ a: 1, b: 2 }, { a: 1 }])).to.deep.equal({ common: { a: 1 }, items: [{ b: 2 }, {}] });
    expect(splitShared([])).to.deep.equal({ common: {}, items: [] });
  });

  it('recognises what it returns, and nothing else', function () {
    expect(isSharedPart(splitShared([{ a: 1 }]))).to.equal(true);
    for (const other of [null, [], {}, { common: {} }, { common: null, items: [] }, { common: {}, items: {} }])
      expect(isSharedPart(other), JSON.stringify(other)).to.equal(false);
  });

  it('property: joining what was split gives every input back', function () {
    const value = fc.oneof(fc.integer(), fc.string(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }));
    const input = fc.dictionary(fc.constantFrom('tenant', 'client', 'request', 'time', 'resource'), value);
    fc.assert(
      fc.property(fc.array(input, { maxLength: 6 }), (inputs) => {
        expect(joinShared(splitShared(inputs))).to.deep.equal(inputs);
      }),
    );
  });
});
