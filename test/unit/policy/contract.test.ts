import { expect } from 'chai';
import {
  exampleInput,
  POLICY_EXAMPLES,
  CLIENT_CREDENTIALS_TOKEN_INPUT,
} from '../../../src/policy/contract/examples.js';
import { checkInput, checkResult, DECISION_POINTS, inputSchema } from '../../../src/policy/index.js';

/**
 * The decision contract's schemas against docs/policy.md's worked examples: each example's input
 * fits its point, each documented decision fits the result schema, and taking any required part
 * away is refused naming it (what the engine answers with a fail-closed "invalid decision input").
 */
describe('unit: the decision contract and its documented examples (policy/contract)', function () {
  for (const example of POLICY_EXAMPLES) {
    it(`example "${example.name}" (${example.point}): its input fits the point and its decision the result schema`, function () {
      expect(checkInput(example.point, exampleInput(example))).to.equal(null);
      expect(checkResult(example.decision)).to.equal(null);
    });
  }

  for (const point of DECISION_POINTS) {
    const example = POLICY_EXAMPLES.find((each) => each.point === point)!;
    const required: readonly string[] = inputSchema(point).required;

    it(`${point}: refuses an input missing any of its required parts (${required.join(', ')}), naming it`, function () {
      for (const part of required) {
        const input = exampleInput(example);
        delete input[part];
        expect(checkInput(point, input), part).to.equal(`(root) must have required property '${part}' (${part})`);
      }
    });

    it(`${point}: refuses a time that is not an RFC 3339 instant`, function () {
      expect(checkInput(point, { ...exampleInput(example), time: 'yesterday' })).to.match(/^\/time must match pattern/);
    });
  }

  it('keeps extra fields an input carries (the contract is open for forward compatibility)', function () {
    const example = POLICY_EXAMPLES[0]!;
    expect(checkInput(example.point, { ...exampleInput(example), future_field: { any: 1 } })).to.equal(null);
  });

  it('refuses an unknown decision point by name', function () {
    expect(checkInput('nowhere' as never, {})).to.equal('unknown decision point "nowhere"');
  });

  it("has an input schema with its point's $id for every decision point", function () {
    for (const point of DECISION_POINTS)
      expect(inputSchema(point)).to.have.property('$id', `arbiter:policy:input:${point}`);
  });

  it('the starting input of the console and the OpenAPI example is a valid token input once tenant and time are set', function () {
    const input = { ...CLIENT_CREDENTIALS_TOKEN_INPUT, tenant: '_default', time: '2026-01-01T00:00:00Z' };
    expect(checkInput('token', input)).to.equal(null);
  });

  it('exampleInput puts the named parties in place, as copies the caller may change', function () {
    const example = POLICY_EXAMPLES.find((each) => JSON.stringify(each.input).includes('"<'))!;
    const first = exampleInput(example);
    const second = exampleInput(example);
    expect(JSON.stringify(first)).to.not.match(/"<[^"]+>"/);
    (first.client as Record<string, unknown>).client_id = 'changed';
    expect((second.client as Record<string, unknown>).client_id).to.not.equal('changed');
  });

  describe('results', function () {
    const valid: [string, unknown][] = [
      ['a bare allow', { allow: true }],
      ['a deny with its error', { allow: false, error: 'invalid_scope', error_description: 'x' }],
      [
        'scopes, resources and outputs',
        {
          allow: true,
          scopes: ['a'],
          resources: [{ resource: 'r', scopes: ['a'] }],
          obligations: {},
          extensions: { k: 1 },
        },
      ],
      ['a single-use token', { allow: true, jit_single_use: true }],
      ['authorization details', { allow: true, authorization_details: [{ type: 'x' }] }],
    ];
    for (const [what, result] of valid)
      it(`accepts ${what}`, function () {
        expect(checkResult(result)).to.equal(null);
      });

    const invalid: [string, unknown, RegExp][] = [
      ['no allow', { scopes: ['a'] }, /required property 'allow'/],
      ['allow as a string', { allow: 'yes' }, /\/allow must be boolean/],
      ['scopes that are not strings', { allow: true, scopes: [1] }, /\/scopes\/0 must be string/],
      ['obligations that are not an object', { allow: true, obligations: [] }, /\/obligations must be object/],
      ['a resource without scopes', { allow: true, resources: [{ resource: 'r' }] }, /required property 'scopes'/],
      ['an error that is not a string', { allow: false, error: 42 }, /\/error must be string/],
      ['a non-object', 'allow', /must be object/],
    ];
    for (const [what, result, problem] of invalid)
      it(`refuses a result with ${what}, naming the problem`, function () {
        expect(checkResult(result)).to.match(problem);
      });
  });
});
