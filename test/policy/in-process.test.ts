/**
 * Rego evaluated in process (the bundle compiled to Wasm by OPA) against the OPA sidecar: two
 * engines over one store, each with its own real managed OPA, one deciding in process and one
 * asking OPA for every decision. They must agree on every decision, including the ones the
 * compiled module hands back to OPA.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import {
  createPolicyEngine,
  type DecisionInput,
  type DecisionOutcome,
  type DecisionPoint,
  type RunningPolicyEngine,
} from '../../src/policy/index.js';
import {
  authorizationCodeInput,
  authorizeInput,
  bob,
  clientCredentialsInput,
  delegationInput,
  evaluationInput,
  introspectInput,
  permissionInput,
  registerInput,
  tokenExchangeInput,
} from './inputs.js';
import {
  alice,
  confidentialClient,
  eventually,
  log,
  publicClient,
  putRule,
  ruleAt,
  startPolicyHarness,
  testConfig,
  type PolicyHarness,
} from './support.js';

describe('Rego evaluated in process', function () {
  let harness: PolicyHarness;
  let viaOpa: RunningPolicyEngine;

  /** Both engines' outcomes for one input, once the in-process engine has compiled the store's revision. */
  const both = async (
    point: DecisionPoint,
    input: DecisionInput,
  ): Promise<{ inProcess: DecisionOutcome; opa: DecisionOutcome }> => {
    const [inProcess, opa] = await Promise.all([harness.engine.decide(point, input), viaOpa.decide(point, input)]);
    return { inProcess, opa };
  };

  /** Waits until the store's revision is served by both OPAs and compiled in process. */
  const inForce = () =>
    eventually(async () => {
      const [mine, theirs] = await Promise.all([harness.engine.revisions(), viaOpa.revisions()]);
      expect(mine.inProcess).to.equal(mine.store);
      expect(mine.opa).to.equal(mine.store);
      expect(theirs.opa).to.equal(mine.store);
      return mine.store;
    }, 20_000);

  before(async function () {
    harness = await startPolicyHarness();
    viaOpa = await createPolicyEngine({
      config: testConfig({ POLICY_REGO_IN_PROCESS: 'false' }),
      store: harness.store,
      log,
      bundleUrl: harness.bundleServer.bundleUrl,
    });
    await inForce();
  });

  after(async function () {
    await viaOpa?.close();
    await harness?.close();
  });

  it('is on with the managed OPA and off with POLICY_REGO_IN_PROCESS=false', async function () {
    expect(harness.config.policyRegoInProcess).to.equal(true);
    expect((await viaOpa.revisions()).inProcess).to.equal(null);
    expect(
      testConfig({ OPA_URL: 'http://127.0.0.1:8181' }).policyRegoInProcess,
      'an external OPA may hold more than our bundle',
    ).to.equal(false);
  });

  it('decides every point of the default pack as OPA does, and in process', async function () {
    const cases: [DecisionPoint, DecisionInput][] = [
      ['authorize', authorizeInput('openid profile invoices.read admin')],
      ['authorize', authorizeInput('admin')],
      ['token', clientCredentialsInput(confidentialClient, { scope: 'invoices.read admin' })],
      ['token', clientCredentialsInput(publicClient)],
      ['token', authorizationCodeInput(['openid', 'email'])],
      ['token_exchange', tokenExchangeInput('invoices.read')],
      ['token_exchange', tokenExchangeInput('invoices.read invoices.write admin')],
      ['introspect', introspectInput(['introspection'])],
      ['introspect', introspectInput([])],
      ['register', registerInput(null)],
      ['register', registerInput({ software_id: 'x', scopes: ['invoices.read'] })],
      ['access_evaluation', evaluationInput('alice', 'read', { id: 'doc-1', properties: { owner: 'alice' } })],
      ['access_evaluation', evaluationInput('bob', 'delete', { id: 'doc-1', properties: { owner: 'alice' } })],
      ['uma_permission', permissionInput(alice, ['view'])],
      ['uma_permission', permissionInput(bob, ['view', 'delete'])],
    ];
    for (const [point, input] of cases) {
      const { inProcess, opa } = await both(point, input);
      expect(inProcess.decision, `${point} ${JSON.stringify(input.request)}`).to.deep.equal(opa.decision);
      expect(inProcess.engineError).to.equal(undefined);
      expect(inProcess.engines?.regoEvaluator, point).to.equal('in-process');
      expect(opa.engines?.regoEvaluator, point).to.equal('opa');
    }
  });

  it('hands a decision that needs a builtin only OPA has (time.parse_rfc3339_ns at /delegation) to OPA', async function () {
    // Only the owner's valid request reaches the expiry check; the others are refused before it, in process.
    const cases: [DecisionInput, string][] = [
      [delegationInput(alice, ['view']), 'opa'],
      [delegationInput(bob, ['view']), 'in-process'],
      [delegationInput(alice, ['view', 'admin']), 'in-process'],
    ];
    for (const [input, evaluator] of cases) {
      const { inProcess, opa } = await both('delegation', input);
      expect(inProcess.decision).to.deep.equal(opa.decision);
      expect(inProcess.engineError).to.equal(undefined);
      expect(inProcess.engines?.regoEvaluator, JSON.stringify(input.subject)).to.equal(evaluator);
    }
    expect((await both('delegation', delegationInput(alice, ['view']))).inProcess.decision).to.include({ allow: true });
  });

  it('agrees with OPA on generated token, introspection and evaluation inputs', async function () {
    this.timeout(60_000);
    const scopes = fc.uniqueArray(
      fc.constantFrom(
        'invoices.read',
        'invoices.write',
        'admin',
        'openid',
        'introspection',
        'uma_protection',
        'x y',
        '',
      ),
      { maxLength: 5 },
    );
    const client = fc.constantFrom(confidentialClient, publicClient);
    const resourceType = fc.constantFrom(null, 'urn:as:introspect', 'https://api.example/payments', 'urn:unknown');
    const entity = fc.record({
      id: fc.string({ maxLength: 8 }),
      properties: fc.dictionary(
        fc.constantFrom('owner', 'classification', 'editors'),
        fc.oneof(fc.string({ maxLength: 6 }), fc.constant('alice'), fc.array(fc.constant('alice'), { maxLength: 2 })),
      ),
    });
    const input = fc.oneof(
      fc
        .tuple(client, scopes, resourceType)
        .map(
          ([who, wanted, type]) =>
            ['token', clientCredentialsInput(who, wanted.length ? { scope: wanted.join(' ') } : {}, type)] as const,
        ),
      scopes.map((held) => ['introspect', introspectInput(held)] as const),
      fc
        .tuple(
          fc.constantFrom('alice', 'bob', ''),
          fc.constantFrom('read', 'edit', 'delete', 'share'),
          entity,
          fc.dictionary(fc.constantFrom('department', 'roles'), fc.string({ maxLength: 6 })),
        )
        .map(
          ([subject, action, resource, properties]) =>
            ['access_evaluation', evaluationInput(subject, action, resource, properties)] as const,
        ),
    );
    await fc.assert(
      fc.asyncProperty(input, async ([point, generated]) => {
        const { inProcess, opa } = await both(point, generated);
        expect(inProcess.decision).to.deep.equal(opa.decision);
        expect(Boolean(inProcess.engineError)).to.equal(Boolean(opa.engineError));
      }),
      { numRuns: 150 },
    );
  });

  it('decides a batch in process in order, as OPA decides it in one query', async function () {
    const inputs = ['read', 'edit', 'delete', 'share'].flatMap((action) =>
      ['alice', 'bob'].map((subject) =>
        evaluationInput(subject, action, { id: 'doc-1', properties: { owner: 'alice' } }),
      ),
    );
    const [inProcess, opa] = await Promise.all([
      harness.engine.decideAll('access_evaluation', inputs),
      viaOpa.decideAll('access_evaluation', inputs),
    ]);
    expect(inProcess.map((outcome) => outcome.decision)).to.deep.equal(opa.map((outcome) => outcome.decision));
    expect(inProcess.map((outcome) => outcome.engines?.regoEvaluator)).to.deep.equal(inputs.map(() => 'in-process'));
  });

  /** Runs `check` with a rule written (and the revision in force), then restores the rule as it was. */
  const withRule = async (
    change: Parameters<typeof putRule>[1],
    restore: Parameters<typeof putRule>[1],
    check: () => Promise<void>,
  ) => {
    await putRule(harness.store, change);
    try {
      await inForce();
      await check();
    } finally {
      await putRule(harness.store, restore);
      await inForce();
    }
  };

  /** A decision OPA made although the point is compiled: fail closed or not, the same outcome as the OPA-only engine's. */
  const handedToOpa = async (point: DecisionPoint, input: DecisionInput) => {
    const { inProcess, opa } = await both(point, input);
    expect(inProcess.engineError).to.equal(opa.engineError);
    expect(inProcess.decision).to.deep.equal(opa.decision);
    expect(inProcess.engines?.regoEvaluator).to.equal('opa');
    expect(
      (await both('token', clientCredentialsInput(confidentialClient))).inProcess.engines?.regoEvaluator,
      'the other decisions stay in process',
    ).to.equal('in-process');
    return opa;
  };

  it('hands an evaluation error (two values for one complete rule) to OPA, whose error fails it closed', async function () {
    const rule = {
      path: 'arbiter/token_conflict.rego',
      kind: 'rego' as const,
      content:
        'package arbiter.token\n\ndecision := {"allow": true, "scopes": []} if input.request.parameters.conflict == "yes"\n',
    };
    await withRule(rule, { ...rule, enabled: false }, async () => {
      const opa = await handedToOpa('token', clientCredentialsInput(confidentialClient, { conflict: 'yes' }));
      expect(opa.engineError)
        .to.match(
          /^OPA could not evaluate the policy: eval_conflict_error: complete rules must not produce multiple outputs \(arbiter\/token[\w/]*\.rego:\d+\); /,
        )
        .and.match(
          /data\.arbiter\.token\.decision is defined at arbiter\/token\/token\.rego:\d+, arbiter\/token_conflict\.rego:3$/,
        );
    });
  });

  it('compiles a bundle that lacks a decision point, and leaves that point to OPA', async function () {
    const rule = await ruleAt(harness.store, 'arbiter/delegation/delegation.rego');
    await withRule({ ...rule, enabled: false }, rule, async () => {
      const opa = await handedToOpa('delegation', delegationInput(alice, ['view']));
      expect(opa.engineError).to.match(/no policy decision for delegation/);
    });
  });

  describe('a revision that uses a builtin the in-process evaluator implements differently (sprintf)', function () {
    const path = 'arbiter/introspect/introspect.rego';
    let original: string;

    before(async function () {
      original = (await ruleAt(harness.store, path)).content;
      const content = original.replace('"the token is not active"', 'sprintf("the token is not %s", ["active"])');
      expect(content, 'the pack module has the message to rewrite').to.not.equal(original);
      await putRule(harness.store, { path, content, kind: 'rego' });
      await eventually(async () => {
        const revisions = await harness.engine.revisions();
        expect(revisions.opa).to.equal(revisions.store);
        expect((await viaOpa.revisions()).opa).to.equal(revisions.store);
      }, 20_000);
    });

    after(async function () {
      await putRule(harness.store, { path, content: original, kind: 'rego' });
      await inForce();
    });

    it('leaves the whole revision to OPA, with the same decisions', async function () {
      // Until the refusal the previous revision stays compiled (and unused); then none is.
      await eventually(async () => expect((await harness.engine.revisions()).inProcess).to.equal(null), 20_000);
      const inactive = introspectInput(['introspection']);
      inactive.token = { ...(inactive.token as object), active: false };
      for (const input of [introspectInput(['introspection']), introspectInput([]), inactive]) {
        const { inProcess, opa } = await both('introspect', input);
        expect(inProcess.decision).to.deep.equal(opa.decision);
        expect(inProcess.engines?.regoEvaluator).to.equal('opa');
      }
      expect((await both('introspect', inactive)).inProcess.decision.error_description).to.equal(
        'the token is not active',
      );
      const { inProcess } = await both('token', clientCredentialsInput(confidentialClient));
      expect(inProcess.engines?.regoEvaluator).to.equal('opa');
    });
  });
});
