import { expect } from 'chai';
import fc from 'fast-check';
import { errors } from 'oidc-provider';
import { enforce, httpRefusal, oauthRefusal, refusalOf } from '../../../src/oauth/shared/enforce.js';
import { narrowedScopes } from '../../../src/oauth/token/grants/decision.js';
import { failClosed } from '../../../src/policy/combine.js';
import { HttpError, isUnavailable } from '../../../src/http/errors.js';
import type { Decision, DecisionInput, DecisionOutcome } from '../../../src/policy/index.js';

const INPUT = { tenant: '_default', client: null, subject: null, request: {}, time: '' } as unknown as DecisionInput;
const outcome = (decision: Decision): DecisionOutcome => ({ point: 'token', decision, input: INPUT });
const failed = (reason = 'OPA down'): DecisionOutcome => failClosed('token', INPUT, reason);

describe('unit: the one refusal mapping (shared/enforce)', function () {
  describe('refusalOf', function () {
    it('is undefined for an allow', function () {
      expect(refusalOf(outcome({ allow: true }))).to.equal(undefined);
    });

    it("is the policy's error, description and 400 for a deny that names them", function () {
      expect(refusalOf(outcome({ allow: false, error: 'invalid_scope', error_description: 'too much' }))).to.deep.equal(
        { status: 400, error: 'invalid_scope', error_description: 'too much' },
      );
    });

    it('is access_denied, "denied by policy" for a deny that names nothing', function () {
      expect(refusalOf(outcome({ allow: false }))).to.deep.equal({
        status: 400,
        error: 'access_denied',
        error_description: 'denied by policy',
      });
    });

    it("takes the endpoint's default error for a deny that names none", function () {
      expect(refusalOf(outcome({ allow: false }), { defaultError: 'forbidden' })?.error).to.equal('forbidden');
    });

    it("prefers the policy's error to the endpoint's default", function () {
      expect(
        refusalOf(outcome({ allow: false, error: 'invalid_target' }), { defaultError: 'forbidden' })?.error,
      ).to.equal('invalid_target');
    });

    it("gives each code the endpoint's status", function () {
      const statusOf = (error: string) => (error === 'forbidden' ? 403 : 400);
      expect(refusalOf(outcome({ allow: false, error: 'forbidden' }), { statusOf })?.status).to.equal(403);
      expect(refusalOf(outcome({ allow: false, error: 'invalid_request' }), { statusOf })?.status).to.equal(400);
    });

    it('is 503 temporarily_unavailable for an engine failure, whatever the endpoint maps codes to', function () {
      const refusal = refusalOf(failed(), { statusOf: () => 403, defaultError: 'forbidden' });
      expect(refusal?.status).to.equal(503);
      expect(refusal?.error).to.equal('temporarily_unavailable');
      expect(refusal?.error_description).to.match(/could not decide/);
    });

    it('is a 503 for an engine failure even if its decision somehow says allow', function () {
      const odd: DecisionOutcome = { ...failed(), decision: { allow: true } };
      expect(refusalOf(odd)?.status).to.equal(503);
    });

    it("never shows the engine's reason (it may name internals) to the caller", function () {
      const refusal = refusalOf(failed('connect ECONNREFUSED 127.0.0.1:8181 secret-path'));
      expect(JSON.stringify(refusal)).to.not.include('ECONNREFUSED');
    });

    it('answers a deny with a 4xx and an engine failure with a 503, for any decision (property)', function () {
      const decisions = fc.record(
        {
          allow: fc.boolean(),
          error: fc.stringMatching(/^[a-z_]{1,20}$/),
          error_description: fc.string({ maxLength: 40 }),
        },
        { requiredKeys: ['allow'] },
      );
      fc.assert(
        fc.property(decisions, fc.boolean(), (decision, engineFails) => {
          const asked = engineFails ? { ...outcome(decision), engineError: 'x' } : outcome(decision);
          const refusal = refusalOf(asked);
          if (decision.allow && !engineFails) return refusal === undefined;
          return refusal !== undefined && (engineFails ? refusal.status === 503 : refusal.status === 400);
        }),
      );
    });
  });

  describe('how a refusal is thrown', function () {
    it("httpRefusal is an HttpError with the refusal's status, code and description", function () {
      const error = httpRefusal(outcome({ allow: false, error: 'forbidden', error_description: 'no' }), {
        statusOf: () => 403,
      });
      expect(error).to.be.instanceOf(HttpError);
      expect(error).to.include({ status: 403, code: 'forbidden', message: 'no' });
      expect(isUnavailable(error)).to.equal(false);
      expect(httpRefusal(outcome({ allow: true }))).to.equal(undefined);
    });

    it('httpRefusal of an engine failure is Unavailable: a 503 logged with its reason, not as an unexpected error', function () {
      const error = httpRefusal(failClosed('token', INPUT, 'OPA did not answer in time'));
      expect(error).to.be.instanceOf(HttpError);
      expect(error).to.include({ status: 503, code: 'temporarily_unavailable' });
      expect(isUnavailable(error)).to.equal(true);
      expect(error).to.include({ dependency: 'policy engine', reason: 'OPA did not answer in time' });
    });

    it("oauthRefusal is oidc-provider's own error class, with the code and description", function () {
      const error = oauthRefusal({
        status: 400,
        error: 'invalid_scope',
        error_description: 'no',
      }) as errors.OIDCProviderError;
      expect(error).to.be.instanceOf(errors.OIDCProviderError);
      expect(error).to.include({ error: 'invalid_scope', error_description: 'no', status: 400 });
    });

    it('oauthRefusal carries a status other than 400 as both status and statusCode', function () {
      const error = oauthRefusal({ status: 503, error: 'temporarily_unavailable', error_description: 'x' });
      expect(error).to.include({ status: 503, statusCode: 503 });
    });

    it('enforce.oauth returns on an allow and throws the mapped refusal on a deny', function () {
      expect(() => enforce.oauth(outcome({ allow: true }))).to.not.throw();
      expect(() => enforce.oauth(outcome({ allow: false, error: 'invalid_target' })))
        .to.throw(errors.OIDCProviderError)
        .with.property('error', 'invalid_target');
    });

    it('enforce.http throws an HttpError 503 on an engine failure', function () {
      expect(() => enforce.http(failed()))
        .to.throw(HttpError)
        .with.property('status', 503);
    });

    it("enforce.http uses the endpoint's rules", function () {
      expect(() => enforce.http(outcome({ allow: false }), { defaultError: 'forbidden', statusOf: () => 403 }))
        .to.throw(HttpError)
        .with.property('status', 403);
    });

    it('enforce.decided lets denies through (they are the answer) and throws only on an engine failure', function () {
      expect(() => enforce.decided(outcome({ allow: false }), outcome({ allow: true }))).to.not.throw();
      expect(() => enforce.decided(outcome({ allow: false }), failed()))
        .to.throw(HttpError)
        .with.property('status', 503);
    });
  });
});

describe('unit: scope narrowing (token/grants/decision narrowedScopes)', function () {
  it('keeps the asked scopes the policy grants, in the order asked', function () {
    expect(narrowedScopes(['write', 'read', 'admin'], { allow: true, scopes: ['read', 'write'] })).to.deep.equal([
      'write',
      'read',
    ]);
  });

  it('grants what the policy grants when nothing was asked', function () {
    expect(narrowedScopes([], { allow: true, scopes: ['read'] })).to.deep.equal(['read']);
  });

  it('grants nothing when the policy names no scopes', function () {
    expect(narrowedScopes(['read'], { allow: true })).to.deep.equal([]);
    expect(narrowedScopes([], { allow: true })).to.deep.equal([]);
  });

  it('never widens: every scope granted for a request that asked some was asked and allowed (property)', function () {
    const scope = fc.constantFrom<string>('a', 'b', 'c', 'd', 'e', 'openid');
    fc.assert(
      fc.property(fc.array(scope, { minLength: 1 }), fc.array(scope), (asked, allowed) => {
        const granted = narrowedScopes(asked, { allow: true, scopes: allowed });
        return granted.every((each) => asked.includes(each) && allowed.includes(each));
      }),
    );
  });

  it('keeps every asked scope the policy allows (property)', function () {
    const scope = fc.constantFrom<string>('a', 'b', 'c', 'd');
    fc.assert(
      fc.property(fc.array(scope, { minLength: 1 }), fc.array(scope), (asked, allowed) => {
        const granted = narrowedScopes(asked, { allow: true, scopes: allowed });
        return asked.filter((each) => allowed.includes(each)).every((each) => granted.includes(each));
      }),
    );
  });
});
