import { expect } from 'chai';
import { authorSchemaProblem, heldSchemaCount } from '../../../src/policy/bundle/data-schemas.js';

describe('unit: author data schemas compiled by Ajv (policy/bundle/data-schemas)', function () {
  // Found 2026-11-30: Ajv keeps every schema it compiled, so each new schema an author tried
  // (one per Admin API write, checked in the policy sandbox) stayed compiled for good.
  it('holds at most the recent author schemas compiled, however many distinct ones are tried', function () {
    const tried = (count: number, from: number) => {
      for (let i = from; i < from + count; i++) {
        const schema = JSON.stringify({ type: 'object', properties: { [`field_${i}`]: { type: 'string' } } });
        expect(authorSchemaProblem(schema)).to.equal(null);
      }
    };
    tried(300, 0);
    const afterFirst = heldSchemaCount();
    expect(afterFirst).to.be.a('number').and.at.least(256);
    tried(1_000, 300);
    expect(heldSchemaCount()).to.equal(afterFirst);
    // A schema tried again after it left is compiled again and still works.
    expect(
      authorSchemaProblem(JSON.stringify({ type: 'object', properties: { field_0: { type: 'string' } } })),
    ).to.equal(null);
  });
});
