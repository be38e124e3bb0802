import { expect } from 'chai';
import { refuseNul } from '../../../src/http/body.js';
import { HttpError } from '../../../src/http/errors.js';

/** The refusal refuseNul throws for `value`, or null. */
function refusal(value: unknown): HttpError | null {
  try {
    refuseNul(value, 'the request body');
    return null;
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
}

describe('unit: U+0000 refused where it is parsed (http/body.ts refuseNul)', () => {
  it('names the field that holds it by its dotted path, the empty name included', () => {
    expect(refusal({ a: { b: 'x\u0000' } })?.details).to.deep.include({ field: 'a.b' });
    // A key "" is a field too (a fuzz case found it unnamed): the refusal names it "".
    const empty = refusal({ '': '\u0000' });
    expect(empty?.details).to.deep.include({ field: '' });
    expect(empty?.message).to.match(/^"" in the request body contains U\+0000/);
    expect(refusal({ 'a\u0000': 1 })?.details).to.deep.include({ field: 'a\u0000' });
  });

  it('names no field for a bare string, and passes values without it', () => {
    const bare = refusal('\u0000');
    expect(bare?.message).to.match(/^the request body contains U\+0000/);
    expect(bare?.details).to.not.have.property('field');
    expect(refusal({ a: ['b', { c: 1 }], '': 'x' })).to.equal(null);
  });
});
