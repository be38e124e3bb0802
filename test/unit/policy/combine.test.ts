import { expect } from 'chai';
import fc from 'fast-check';
import { combine, failClosed } from '../../../src/policy/combine.js';
import type { CedarOutputs, CedarVerdict } from '../../../src/policy/cedar/driver.js';
import type { RegoVerdict } from '../../../src/policy/opa/verdict.js';
import { ENGINE_FAILURE_ERROR, type DecisionInput } from '../../../src/policy/index.js';

const INPUT = {
  tenant: '_default',
  client: null,
  subject: null,
  request: { endpoint: '/token' },
  time: '2026-01-01T00:00:00Z',
} as unknown as DecisionInput;
const NO_OUTPUTS: CedarOutputs = { obligations: {}, extensions: {} };

const regoAllows = (extra: object = {}): RegoVerdict => ({
  kind: 'decided',
  decision: { allow: true, scopes: ['read'], ...extra },
});
const regoDenies: RegoVerdict = {
  kind: 'decided',
  decision: { allow: false, error: 'invalid_scope', error_description: 'rego says no' },
};
const regoUndefined: RegoVerdict = { kind: 'undefined' };
const regoFails: RegoVerdict = { kind: 'failed', reason: 'opa down' };
const cedarNone: CedarVerdict = { kind: 'none' };
const cedarFails: CedarVerdict = { kind: 'failed', reason: 'cedar broke' };
const cedar = (allow: boolean, outputs: Partial<CedarOutputs> = {}, policies = ['p1']): CedarVerdict => ({
  kind: 'decided',
  allow,
  policies,
  outputs: { ...NO_OUTPUTS, ...outputs },
  evaluationErrors: [],
});

describe('unit: combining the Rego and Cedar verdicts (policy/combine)', function () {
  it('takes the Rego decision as it is when Cedar has no policy for the request', function () {
    const outcome = combine('token', INPUT, regoAllows(), cedarNone);
    expect(outcome.decision).to.deep.equal({ allow: true, scopes: ['read'] });
    expect(outcome.engineError).to.equal(undefined);
    expect(outcome.engines).to.deep.equal({ rego: 'allow', regoEvaluator: 'opa', cedar: 'none' });
  });

  it('takes the Cedar decision when Rego is undefined, with its error when it forbids', function () {
    expect(combine('token', INPUT, regoUndefined, cedar(true)).decision).to.deep.equal({ allow: true });
    expect(
      combine(
        'token',
        INPUT,
        regoUndefined,
        cedar(false, { error: 'access_denied', error_description: 'cedar says no' }),
      ).decision,
    ).to.deep.equal({
      allow: false,
      error: 'access_denied',
      error_description: 'cedar says no',
    });
  });

  it('lets a deny from either engine win when both apply', function () {
    expect(combine('token', INPUT, regoDenies, cedar(true)).decision).to.deep.equal(
      regoDenies.kind === 'decided' && regoDenies.decision,
    );
    const cedarForbids = combine('token', INPUT, regoAllows(), cedar(false, { error: 'access_denied' }));
    expect(cedarForbids.decision).to.deep.equal({ allow: false, error: 'access_denied', error_description: undefined });
    expect(cedarForbids.engines).to.include({ rego: 'allow', cedar: 'deny' });
  });

  it('keeps the Rego output claims and adds the obligations and extensions of the Cedar permits', function () {
    const outcome = combine(
      'introspect',
      INPUT,
      regoAllows({ obligations: { log: true }, extensions: { tier: 'gold' } }),
      cedar(true, { obligations: { mfa: 'required' }, extensions: { region: 'eu' } }, ['permit-eu']),
    );
    expect(outcome.decision).to.deep.equal({
      allow: true,
      scopes: ['read'],
      obligations: { log: true, mfa: 'required' },
      extensions: { tier: 'gold', region: 'eu' },
    });
    expect(outcome.engines?.cedarPolicies).to.deep.equal(['permit-eu']);
  });

  it('never lets a Cedar permit undo what Rego withheld or required: where both set an output, Rego’s stays', function () {
    const outcome = combine(
      'token',
      INPUT,
      regoAllows({ obligations: { dpop_required: true }, extensions: { issue_refresh_token: false } }),
      cedar(true, { obligations: { dpop_required: false }, extensions: { issue_refresh_token: true, tier: 'gold' } }),
    );
    expect(outcome.decision).to.deep.equal({
      allow: true,
      scopes: ['read'],
      obligations: { dpop_required: true },
      extensions: { issue_refresh_token: false, tier: 'gold' },
    });
  });

  it('fails closed when neither engine has a decision, naming the decision point', function () {
    const outcome = combine('register', INPUT, regoUndefined, cedarNone);
    expect(outcome.decision).to.include({ allow: false, error: ENGINE_FAILURE_ERROR });
    expect(outcome.engineError).to.contain('register');
  });

  it('fails closed when either engine fails, whatever the other said, and reports the failure reason', function () {
    for (const [rego, cedarVerdict, reason] of [
      [regoFails, cedar(true), 'opa down'],
      [regoAllows(), cedarFails, 'cedar broke'],
      [regoFails, cedarFails, 'opa down'],
    ] as const) {
      const outcome = combine('token', INPUT, rego, cedarVerdict);
      expect(outcome.decision.allow).to.equal(false);
      expect(outcome.decision.error).to.equal(ENGINE_FAILURE_ERROR);
      expect(outcome.engineError).to.equal(reason);
    }
  });

  it('names the in-process evaluator when the Rego verdict came from Wasm', function () {
    expect(combine('token', INPUT, { ...regoAllows(), inProcess: true }, cedarNone).engines?.regoEvaluator).to.equal(
      'in-process',
    );
  });

  it('failClosed keeps the point and input and tells the client to try again later', function () {
    const outcome = failClosed('authorize', INPUT, 'timeout');
    expect(outcome).to.deep.include({ point: 'authorize', input: INPUT, engineError: 'timeout' });
    expect(outcome.decision).to.deep.equal({
      allow: false,
      error: ENGINE_FAILURE_ERROR,
      error_description: 'the policy engine could not decide this request; try again later',
    });
  });

  it('property: allows only when no engine failed, one applied, and every engine that applied allowed', function () {
    const regoVerdict = fc.oneof(
      fc.boolean().map((allow): RegoVerdict => (allow ? regoAllows() : regoDenies)),
      fc.constant(regoUndefined),
      fc.constant(regoFails),
    );
    const cedarVerdict = fc.oneof(
      fc.boolean().map((allow) => cedar(allow)),
      fc.constant(cedarNone),
      fc.constant(cedarFails),
    );
    fc.assert(
      fc.property(regoVerdict, cedarVerdict, (rego, cedarV) => {
        const applied = [
          rego.kind === 'decided' ? rego.decision.allow : undefined,
          cedarV.kind === 'decided' ? cedarV.allow : undefined,
        ].filter((verdict) => verdict !== undefined);
        const failed = rego.kind === 'failed' || cedarV.kind === 'failed';
        const expected = !failed && applied.length > 0 && applied.every(Boolean);
        const outcome = combine('token', INPUT, rego, cedarV);
        expect(outcome.decision.allow).to.equal(expected);
        expect(outcome.engineError !== undefined).to.equal(failed || applied.length === 0);
      }),
    );
  });
});
