/** The Admin API's rule check: the engines' own parsers decide, and their messages are quoted. */
import { expect } from 'chai';
import { resolveOpaBinary } from '../../src/policy/opa/binary.js';
import { validateRule } from '../../src/policy/bundle/validate-rule.js';

describe('policy rule validation', function () {
  const opa = resolveOpaBinary(null);

  it('accepts a valid Rego rule under package arbiter', async function () {
    expect(
      await validateRule(
        opa,
        'rego',
        'arbiter/custom.rego',
        'package arbiter.token\n\ndecision := {"allow": true} if input.client.client_id == "x"\n',
      ),
    ).to.equal(null);
    expect(
      await validateRule(opa, 'rego', 'arbiter/helpers.rego', '# helpers\npackage arbiter.lib.custom\n\nx := 1\n'),
    ).to.equal(null);
  });

  it("quotes OPA's parse error, naming the rule's path and line", async function () {
    const message = await validateRule(
      opa,
      'rego',
      'arbiter/broken.rego',
      'package arbiter.token\n\ndecision := {"allow": true} if {\n  input.a ==\n}\n',
    );
    expect(message).to.match(/^Rego error: .*arbiter\/broken\.rego:5: rego_parse_error: unexpected } token/);
    expect(message).to.not.include('/tmp');
  });

  it("quotes OPA's compile error", async function () {
    const message = await validateRule(
      opa,
      'rego',
      'arbiter/unsafe.rego',
      'package arbiter.token\n\ndecision := {"allow": y}\n',
    );
    expect(message).to.match(/rego_unsafe_var_error: var y is unsafe/);
  });

  it('refuses a package outside arbiter and a path of the wrong kind', async function () {
    expect(await validateRule(opa, 'rego', 'other.rego', 'package system.authz\n\nallow := true\n')).to.match(
      /package system\.authz is outside arbiter/,
    );
    expect(await validateRule(opa, 'rego', 'arbiter/token.cedar', 'package arbiter.token\n')).to.match(
      /must end with \.rego/,
    );
    expect(await validateRule(opa, 'cedar', 'arbiter/rules.rego', 'permit(principal, action, resource);')).to.match(
      /must end with \.cedar/,
    );
    expect(await validateRule(opa, 'rego', '../escape.rego', 'package arbiter.x\n')).to.match(/relative/);
  });

  it('accepts valid Cedar and quotes Cedar parse errors with their position', async function () {
    expect(
      await validateRule(
        opa,
        'cedar',
        'arbiter/docs.cedar',
        'permit(principal, action == Action::"read", resource) when { context.ip == "192.0.2.1" };',
      ),
    ).to.equal(null);
    const message = await validateRule(
      opa,
      'cedar',
      'arbiter/docs.cedar',
      'permit(principal, action, resource)\nwhen { x };',
    );
    expect(message).to.match(/^Cedar parse error: .*invalid variable: x at 2:8/);
  });

  it('refuses Cedar templates, which a rule cannot link', async function () {
    expect(
      await validateRule(opa, 'cedar', 'arbiter/t.cedar', 'permit(principal == ?principal, action, resource);'),
    ).to.match(/templates are not supported/);
  });
});
