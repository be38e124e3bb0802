import { expect } from 'chai';
import fc from 'fast-check';
import { decidePermissions, grantedScopes, type PermissionAnswer } from '../../../src/uma/decide.js';
import { umaResources, resourceInput, type UmaResourceRecord } from '../../../src/uma/resources.js';
import {
  mergedPermissions,
  permissionsInForce,
  permissionsOf,
} from '../../../src/oauth/token/grants/uma-ticket/permissions.js';
import { authzenDecision, evaluationInput, requestOfEvaluation } from '../../../src/authzen/evaluate.js';
import { DEFAULT_PAGE_LIMIT, pageOf } from '../../../src/authzen/paging.js';
import { failClosed } from '../../../src/policy/combine.js';
import { requestInput, type Decision, type DecisionInput, type DecisionOutcome } from '../../../src/policy/index.js';
import { HttpError } from '../../../src/http/errors.js';
import { StubPolicyEngine } from '../../support/stub-policy.js';
import { memoryStore, TENANT } from '../../support/unit.js';

const INPUT = { tenant: TENANT, client: null, subject: null, request: {}, time: '' } as unknown as DecisionInput;
const outcome = (decision: Decision): DecisionOutcome => ({ point: 'uma_permission', decision, input: INPUT });
const answer = (decision: Decision, asked: string[]): PermissionAnswer => ({
  permission: { resource_id: 'r1', resource_scopes: asked },
  outcome: outcome(decision),
});

describe('unit: UMA permission decisions (uma/decide)', function () {
  const store = memoryStore();
  const record: UmaResourceRecord = {
    id: 'photo-album',
    name: 'Album',
    type: 'urn:photos',
    resourceScopes: ['view', 'print'],
    description: null,
    iconUri: null,
    ownerSub: 'alice',
    ownerClientId: 'photo-rs',
    createdAt: '2026-01-01T00:00:00.000Z',
  };
  before(async function () {
    await umaResources(store(), TENANT).insert(record);
  });

  const question = {
    operation: 'rpt' as const,
    tenant: TENANT,
    client: null,
    subject: { sub: 'bob', idp: null, claims: {} },
    request: requestInput({ endpoint: '/token', parameters: {} }),
  };

  it('asks uma_permission once per permission, with the resource as stored and its owner', async function () {
    const policy = new StubPolicyEngine().answer('uma_permission', { allow: true, scopes: ['view'] });
    const answers = await decidePermissions(store(), policy, question, [
      { resource_id: 'photo-album', resource_scopes: ['view'] },
      { resource_id: 'unknown', resource_scopes: ['x'] },
    ]);
    expect(answers.map((each) => each.permission.resource_id)).to.deep.equal(['photo-album', 'unknown']);
    const [known, unknown] = policy.inputsAt('uma_permission');
    expect(known!.permission).to.deep.include({
      operation: 'rpt',
      resource_id: 'photo-album',
      resource_scopes: ['view'],
    });
    expect((known!.permission as { resource: unknown }).resource).to.deep.equal(resourceInput(record));
    expect((unknown!.permission as { resource: unknown }).resource, 'an unknown id is told as null').to.equal(null);
    expect(known!.subject).to.deep.equal(question.subject);
  });

  it('adds the delegations on each resource when the question has them, and none otherwise', async function () {
    const policy = new StubPolicyEngine().answer('uma_permission', { allow: true });
    const delegated: string[] = [];
    await decidePermissions(
      store(),
      policy,
      {
        ...question,
        delegations: async (resourceId) => {
          delegated.push(resourceId);
          return [];
        },
      },
      [{ resource_id: 'photo-album', resource_scopes: ['view'] }],
    );
    await decidePermissions(store(), policy, question, [{ resource_id: 'photo-album', resource_scopes: ['view'] }]);
    expect(delegated).to.deep.equal(['photo-album']);
    const [withDelegations, without] = policy.inputsAt('uma_permission');
    expect(withDelegations!.delegations).to.deep.equal([]);
    expect(without).to.not.have.property('delegations');
  });

  it('resourceInput tells the policy the owner and scopes of a stored resource', function () {
    expect(resourceInput(record)).to.deep.include({ _id: 'photo-album', type: 'urn:photos' });
    expect(resourceInput(record)?.owner, 'a user owns it, not the client that registered it').to.deep.equal({
      sub: 'alice',
      client_id: null,
    });
    expect(resourceInput({ ...record, ownerSub: null })?.owner, 'a client-owned resource').to.deep.equal({
      sub: null,
      client_id: 'photo-rs',
    });
    expect(resourceInput(null)).to.equal(null);
  });

  it('grantedScopes are the allowed scopes among those asked', function () {
    expect(grantedScopes(answer({ allow: true, scopes: ['view', 'delete'] }, ['view', 'print']))).to.deep.equal([
      'view',
    ]);
  });

  it('grantedScopes are none for a deny, whatever scopes it names', function () {
    expect(grantedScopes(answer({ allow: false, scopes: ['view'] }, ['view']))).to.deep.equal([]);
  });

  it('grantedScopes are none for an engine failure', function () {
    const failed: PermissionAnswer = {
      permission: { resource_id: 'r1', resource_scopes: ['view'] },
      outcome: { ...failClosed('uma_permission', INPUT, 'down'), decision: { allow: true, scopes: ['view'] } },
    };
    expect(grantedScopes(failed)).to.deep.equal([]);
  });

  it('grantedScopes are none for an allow that names no scopes', function () {
    expect(grantedScopes(answer({ allow: true }, ['view']))).to.deep.equal([]);
  });

  it('grantedScopes never exceed what was asked (property)', function () {
    const scope = fc.constantFrom<string>('view', 'print', 'edit', 'delete');
    fc.assert(
      fc.property(fc.array(scope), fc.array(scope), fc.boolean(), (asked, allowed, allow) => {
        const granted = grantedScopes(answer({ allow, scopes: allowed }, asked));
        return granted.every((each) => asked.includes(each) && allowed.includes(each) && allow);
      }),
    );
  });
});

describe('unit: the permissions of a requesting party token (uma-ticket/permissions)', function () {
  const now = 1_800_000_000;

  it('permissionsOf reads the permissions kept in the token, none when there are none or they are malformed', function () {
    const kept = [{ resource_id: 'a', resource_scopes: ['view'] }];
    expect(permissionsOf({ extra: { permissions: kept } })).to.deep.equal(kept);
    expect(permissionsOf({})).to.deep.equal([]);
    expect(permissionsOf({ extra: { permissions: 'nope' } })).to.deep.equal([]);
  });

  it("permissionsInForce gives each permission its own end, else the token's", function () {
    const token = {
      exp: now + 600,
      extra: {
        permissions: [
          { resource_id: 'a', resource_scopes: ['view'] },
          { resource_id: 'b', resource_scopes: ['view'], exp: now + 60 },
        ],
      },
    };
    expect(permissionsInForce(token, now)).to.deep.equal([
      { resource_id: 'a', resource_scopes: ['view'], exp: now + 600 },
      { resource_id: 'b', resource_scopes: ['view'], exp: now + 60 },
    ]);
  });

  it('permissionsInForce drops the permissions that have ended, at their end exactly too', function () {
    const token = {
      exp: now + 600,
      extra: {
        permissions: [
          { resource_id: 'ended', resource_scopes: ['view'], exp: now - 1 },
          { resource_id: 'ends-now', resource_scopes: ['view'], exp: now },
          { resource_id: 'open', resource_scopes: ['view'], exp: now + 1 },
        ],
      },
    };
    expect(permissionsInForce(token, now).map((each) => each.resource_id)).to.deep.equal(['open']);
  });

  it('permissionsInForce keeps a permission without any end when the token has none', function () {
    expect(
      permissionsInForce({ extra: { permissions: [{ resource_id: 'a', resource_scopes: [] }] } }, now),
    ).to.have.length(1);
  });

  it('mergedPermissions keeps the new grants and the old ones on other resources only', function () {
    const granted = [{ resource_id: 'a', resource_scopes: ['print'] }];
    const kept = [
      { resource_id: 'a', resource_scopes: ['view'] },
      { resource_id: 'b', resource_scopes: ['view'] },
    ];
    expect(mergedPermissions(granted, kept)).to.deep.equal([
      { resource_id: 'a', resource_scopes: ['print'] },
      { resource_id: 'b', resource_scopes: ['view'] },
    ]);
  });

  it('mergedPermissions has each resource at most once when the grants are distinct (property)', function () {
    const id = fc.constantFrom<string>('a', 'b', 'c', 'd');
    const permission = id.map((resource_id) => ({ resource_id, resource_scopes: ['view'] }));
    fc.assert(
      fc.property(
        fc.uniqueArray(permission, { selector: (p) => p.resource_id }),
        fc.array(permission),
        (granted, kept) => {
          const ids = mergedPermissions(granted, kept).map((each) => each.resource_id);
          const renewed = new Set(granted.map((each) => each.resource_id));
          return ids.filter((each) => renewed.has(each)).length === renewed.size;
        },
      ),
    );
  });
});

describe('unit: AuthZEN decisions (authzen/evaluate, authzen/paging)', function () {
  const aOutcome = (decision: Decision): DecisionOutcome => ({ point: 'access_evaluation', decision, input: INPUT });

  it('an allow without outputs is a bare true decision', function () {
    expect(authzenDecision(aOutcome({ allow: true }))).to.deep.equal({ decision: true });
  });

  it("an allow carries the policy's obligations and extensions in context", function () {
    expect(
      authzenDecision(aOutcome({ allow: true, obligations: { mfa: true }, extensions: { tier: 'gold' } })),
    ).to.deep.equal({ decision: true, context: { obligations: { mfa: true }, extensions: { tier: 'gold' } } });
  });

  it("a deny carries the policy's reason and error", function () {
    expect(
      authzenDecision(aOutcome({ allow: false, error: 'insufficient_rank', error_description: 'captains only' })),
    ).to.deep.equal({ decision: false, context: { reason: 'captains only', error: 'insufficient_rank' } });
  });

  it('a deny that says nothing is access_denied, "denied by policy"', function () {
    expect(authzenDecision(aOutcome({ allow: false }))).to.deep.equal({
      decision: false,
      context: { reason: 'denied by policy', error: 'access_denied' },
    });
  });

  it("an engine failure is a false decision whose context carries the 503 and the refusal's text, not the reason", function () {
    const decided = authzenDecision(failClosed('access_evaluation', INPUT, 'OPA at 127.0.0.1:8181 refused'));
    expect(decided.decision).to.equal(false);
    expect(decided.context).to.deep.equal({
      error: { status: 503, message: 'the policy engine could not decide this request; try again later' },
    });
  });

  it('requestOfEvaluation is a POST to the endpoint with no parameters (the body is in evaluation)', function () {
    const request = requestOfEvaluation('/access/v1/evaluation');
    expect(request).to.include({ endpoint: '/access/v1/evaluation', method: 'POST' });
    expect(request.parameters).to.deep.equal({});
  });

  it('evaluationInput has no subject of its own, the evaluation, and the delegations of its subject on its resource', async function () {
    const asked: [string, string][] = [];
    const evaluation = {
      subject: { type: 'user', id: 'alice' },
      action: { name: 'read' },
      resource: { type: 'doc', id: 'd1' },
    };
    const input = await evaluationInput(
      {
        tenant: TENANT,
        client: { client_id: 'pep' } as never,
        time: '2026-01-01T00:00:00Z',
        request: requestOfEvaluation('/access/v1/evaluation'),
      },
      evaluation as never,
      async (subjectId, resourceId) => {
        asked.push([subjectId, resourceId]);
        return [];
      },
    );
    expect(asked).to.deep.equal([['alice', 'd1']]);
    expect(input).to.deep.include({
      tenant: TENANT,
      subject: null,
      evaluation,
      delegations: [],
      time: '2026-01-01T00:00:00Z',
    });
  });

  describe('paging (§8.2)', function () {
    const results = Array.from({ length: 25 }, (_, index) => index);

    it('answers the first page with the default limit when none is named', function () {
      const { page, results: first } = pageOf(
        Array.from({ length: 150 }, (_, i) => i),
        undefined,
        'c',
      );
      expect(first).to.have.length(DEFAULT_PAGE_LIMIT);
      expect(page).to.include({ count: DEFAULT_PAGE_LIMIT, total: 150 });
      expect(page.next_token).to.not.equal('');
    });

    it('walks every result exactly once, page by page, and ends with an empty next_token', function () {
      const seen: number[] = [];
      let token: string | undefined;
      for (let pages = 0; pages < 10; pages++) {
        const { page, results: slice } = pageOf(results, { limit: 10, token }, { q: 1 });
        seen.push(...slice);
        if (!page.next_token) break;
        token = page.next_token;
      }
      expect(seen).to.deep.equal(results);
    });

    it('has no next page when everything fits', function () {
      expect(pageOf(results, { limit: 25 }, 'c').page.next_token).to.equal('');
    });

    it('refuses a token replayed with other criteria (400 naming page.token)', function () {
      const { page } = pageOf(results, { limit: 10 }, { q: 1 });
      expect(() => pageOf(results, { limit: 10, token: page.next_token }, { q: 2 }))
        .to.throw(HttpError)
        .with.property('message')
        .that.matches(/other criteria/);
    });

    it('refuses a token replayed with another limit', function () {
      const { page } = pageOf(results, { limit: 10 }, 'c');
      expect(() => pageOf(results, { limit: 5, token: page.next_token }, 'c')).to.throw(HttpError);
    });

    for (const [what, token] of [
      ['not base64url JSON', 'not-a-token'],
      ['a negative offset', Buffer.from(JSON.stringify({ o: -1, f: 'x' })).toString('base64url')],
      ['a fractional offset', Buffer.from(JSON.stringify({ o: 1.5, f: 'x' })).toString('base64url')],
      ['no fingerprint', Buffer.from(JSON.stringify({ o: 1 })).toString('base64url')],
    ]) {
      it(`refuses a token with ${what} as one this server did not issue`, function () {
        expect(() => pageOf(results, { token }, 'c'))
          .to.throw(HttpError)
          .with.property('message', 'page.token is not a token this server issued');
      });
    }

    it('counts and totals every page consistently (property)', function () {
      fc.assert(
        fc.property(fc.array(fc.integer(), { maxLength: 60 }), fc.integer({ min: 1, max: 20 }), (all, limit) => {
          const { page, results: slice } = pageOf(all, { limit }, 'p');
          return (
            page.total === all.length && page.count === slice.length && slice.length === Math.min(limit, all.length)
          );
        }),
      );
    });
  });
});
