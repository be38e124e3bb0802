import { expect } from 'chai';
import { changeKindOf, comparedDecision } from '../../../src/policy/replay/compare.js';

const allow = (fields: Record<string, unknown> = {}) => comparedDecision({ allow: true, ...fields });
const deny = (fields: Record<string, unknown> = {}) => comparedDecision({ allow: false, ...fields });

describe('unit: how two decisions on one input differ (policy/replay/compare)', function () {
  it('is null for the same decision, whatever the order of keys and lists compared as sets', function () {
    expect(
      changeKindOf(
        allow({ scopes: ['a', 'b'], obligations: { x: 1, y: 2 } }),
        allow({ scopes: ['b', 'a'], obligations: { y: 2, x: 1 } }),
      ),
    ).to.equal(null);
    expect(changeKindOf(allow(), allow({ scopes: [], authorization_details: [] }))).to.equal(null);
    // Why no engine decided is shown, not compared: its wording depends on where the evaluation ran.
    expect(
      changeKindOf(
        deny({ error: 'temporarily_unavailable', engineError: 'OPA said …' }),
        deny({ error: 'temporarily_unavailable', engineError: 'opa eval said …' }),
      ),
    ).to.equal(null);
  });

  it('says allow_to_deny and deny_to_allow when the verdict flips', function () {
    expect(changeKindOf(allow({ scopes: ['a'] }), deny({ error: 'invalid_scope' }))).to.equal('allow_to_deny');
    expect(changeKindOf(deny({ error: 'invalid_scope' }), allow({ scopes: ['a'] }))).to.equal('deny_to_allow');
  });

  it('says narrower for fewer scopes or details, an added obligation, a token made single-use', function () {
    expect(changeKindOf(allow({ scopes: ['a', 'b'] }), allow({ scopes: ['a'] }))).to.equal('narrower');
    expect(
      changeKindOf(
        allow({ authorization_details: [{ type: 't', x: 1 }, { type: 'u' }] }),
        allow({ authorization_details: [{ x: 1, type: 't' }] }),
      ),
    ).to.equal('narrower');
    expect(changeKindOf(allow(), allow({ obligations: { dpop_required: true } }))).to.equal('narrower');
    expect(changeKindOf(allow(), allow({ jit_single_use: true }))).to.equal('narrower');
  });

  it('says wider for the reverse', function () {
    expect(changeKindOf(allow({ scopes: ['a'] }), allow({ scopes: ['a', 'b'] }))).to.equal('wider');
    expect(changeKindOf(allow({ obligations: { dpop_required: true } }), allow())).to.equal('wider');
    expect(changeKindOf(allow({ jit_single_use: true }), allow({ jit_single_use: false }))).to.equal('wider');
  });

  it('says other for a grant that loses and gains, a changed obligation value or extension, another error on a deny', function () {
    expect(changeKindOf(allow({ scopes: ['a'] }), allow({ scopes: ['b'] }))).to.equal('other');
    expect(
      changeKindOf(allow({ obligations: { role: 'editor' } }), allow({ obligations: { role: 'viewer' } })),
    ).to.equal('other');
    expect(changeKindOf(allow({ extensions: { a: 1 } }), allow({ extensions: { a: 2 } }))).to.equal('other');
    expect(changeKindOf(allow({ scopes: ['a', 'b'], extensions: { a: 1 } }), allow({ scopes: ['a'] }))).to.equal(
      'other',
    );
    expect(changeKindOf(deny({ error: 'invalid_scope' }), deny({ error: 'access_denied' }))).to.equal('other');
  });

  it('keeps only the compared fields of a recorded decision (not its point or engines)', function () {
    expect(
      comparedDecision({ allow: true, scopes: ['a'], point: 'token', engines: { rego: 'allow' } } as never),
    ).to.deep.equal({ allow: true, scopes: ['a'] });
  });
});
