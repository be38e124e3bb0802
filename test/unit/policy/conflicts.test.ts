import { expect } from 'chai';
import { withConflictingDefinitions } from '../../../src/policy/opa/conflicts.js';

const files = [
  {
    kind: 'rego',
    path: 'arbiter/token/token.rego',
    content:
      'package arbiter.token\n\ndefault decision := {"allow": false}\n\ndecision := x if {\n\ttrue\n}\n\nx := {"allow": true}\n',
  },
  { kind: 'rego', path: 'arbiter/token2.rego', content: 'package arbiter.token\n\ndecision := {"allow": false}\n' },
  { kind: 'rego', path: 'arbiter/other.rego', content: 'package arbiter.other\n\ndecision := {"allow": true}\n' },
  { kind: 'cedar', path: 'arbiter/token.cedar', content: 'decision' },
];

describe('unit: both sides of an eval_conflict_error (policy/opa/conflicts)', function () {
  it('names every definition of the rule OPA points at, in its package only (defaults left out)', function () {
    const message =
      'OPA could not evaluate the policy: eval_conflict_error: complete rules must not produce multiple outputs (arbiter/token/token.rego:5)';
    expect(withConflictingDefinitions(message, files)).to.equal(
      `${message}; data.arbiter.token.decision is defined at arbiter/token/token.rego:5, arbiter/token2.rego:3`,
    );
  });

  it('finds the rule of an else branch OPA points at', function () {
    const elseFiles = [
      {
        kind: 'rego',
        path: 'a.rego',
        content: 'package p\n\n# a comment\nd := 1 if {\n\tfalse\n} else := 2 if {\n\ttrue\n}\n',
      },
      { kind: 'rego', path: 'b.rego', content: 'package p\n\nd := 3\n' },
    ];
    const message = 'eval_conflict_error: complete rules must not produce multiple outputs (a.rego:6)';
    expect(withConflictingDefinitions(message, elseFiles)).to.equal(
      `${message}; data.p.d is defined at a.rego:4, b.rego:3`,
    );
  });

  it('leaves other errors, unknown files and rules defined once as they are', function () {
    for (const message of [
      'eval_type_error: something (arbiter/token2.rego:3)',
      'eval_conflict_error: complete rules must not produce multiple outputs (arbiter/nowhere.rego:3)',
      'eval_conflict_error: complete rules must not produce multiple outputs (arbiter/token/token.rego:9)',
      'OPA answered 500: something',
    ])
      expect(withConflictingDefinitions(message, files)).to.equal(message);
  });
});
