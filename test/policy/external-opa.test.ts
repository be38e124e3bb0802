/**
 * OPA_URL set: the engine manages no process and talks to an OPA run elsewhere (here an OPA
 * process the test runs itself, polling the same bundle endpoint). Covers every way the engine
 * can fail to decide: unreachable, no decision (bundle not activated), timeout.
 */
import { expect } from 'chai';
import { ENGINE_FAILURE_ERROR, waitUntilReady } from '../../src/policy/index.js';
import { resolveOpaBinary } from '../../src/policy/opa/binary.js';
import { ManagedOpa } from '../../src/policy/opa/process.js';
import { authorizeInput, delegationInput, evaluationInput } from './inputs.js';
import {
  alice,
  BUNDLE_TOKEN,
  eventually,
  freePort,
  log,
  putRule,
  ruleAt,
  startPolicyHarness,
  type PolicyHarness,
} from './support.js';

/** The external OPA (run here as a ManagedOpa) requires a token; OPA_TOKEN is what the engine sends it. */
const OPA_TOKEN = 'external-opa-token-0123456789';

describe('policy engine with an external OPA (OPA_URL)', function () {
  let harness: PolicyHarness;
  let port: number;
  let opa: ManagedOpa | null = null;

  const startOpa = async (bundleToken = BUNDLE_TOKEN) => {
    opa = new ManagedOpa({
      binary: resolveOpaBinary(null),
      bundleUrl: harness.bundleServer.bundleUrl,
      bundleToken,
      pollMinSeconds: 1,
      pollMaxSeconds: 2,
      healthCheckIntervalMs: 2_000,
      log,
      port,
      apiToken: OPA_TOKEN,
    });
    await opa.start();
  };
  const stopOpa = async () => {
    await opa?.stop();
    opa = null;
  };

  before(async function () {
    port = await freePort();
    harness = await startPolicyHarness(
      { OPA_URL: `http://127.0.0.1:${port}/`, OPA_TOKEN, POLICY_DECISION_TIMEOUT_MS: '500' },
      { waitForBundle: false },
    );
  });

  after(async function () {
    await stopOpa();
    await harness?.close();
  });

  it('starts no OPA of its own', function () {
    expect(harness.engine.managedOpaPid).to.equal(undefined);
    expect(harness.engine.opaUrl).to.equal(`http://127.0.0.1:${port}`);
  });

  it('fails closed while OPA is unreachable', async function () {
    expect(await harness.engine.isReady()).to.equal(false);
    const outcome = await harness.engine.decide('authorize', authorizeInput('openid'));
    expect(outcome.decision).to.deep.equal({
      allow: false,
      error: ENGINE_FAILURE_ERROR,
      error_description: 'the policy engine could not decide this request; try again later',
    });
    expect(outcome.engineError).to.equal('OPA is unreachable (connection refused)');
  });

  it('fails closed while OPA has no bundle (it returns no decision), even where a Cedar rule would permit', async function () {
    const permitAll = await putRule(harness.store, {
      path: 'arbiter/permit-all.cedar',
      kind: 'cedar',
      content: 'permit (principal, action, resource);',
    });
    await startOpa('not-the-bundle-token');
    try {
      expect(await waitUntilReady(harness.engine, 1500)).to.equal(false);
      for (const [point, input] of [
        ['authorize', authorizeInput('openid')],
        ['access_evaluation', evaluationInput('bob', 'read', { id: 'doc-1', properties: { owner: 'alice' } })],
      ] as const) {
        const outcome = await harness.engine.decide(point, input);
        expect(outcome.decision.allow, point).to.equal(false);
        expect(outcome.engineError, point).to.equal('OPA has not activated the policy bundle');
      }
    } finally {
      await putRule(harness.store, { ...permitAll, enabled: false });
      await stopOpa();
    }
  });

  it('decides once OPA has the bundle', async function () {
    await startOpa();
    expect(await waitUntilReady(harness.engine, 20_000)).to.equal(true);
    const { decision, engineError } = await harness.engine.decide('authorize', authorizeInput('openid email'));
    expect(engineError).to.equal(undefined);
    expect(decision).to.include({ allow: true });
  });

  it('fails closed when OPA does not answer within POLICY_DECISION_TIMEOUT_MS', async function () {
    const original = await ruleAt(harness.store, 'arbiter/delegation/delegation.rego');
    const slow =
      'package arbiter.delegation\n\n# Millions of iterations: far beyond the 500 ms decision timeout.\ndecision := {"allow": count([1 | some i in numbers.range(1, 2500); some j in numbers.range(1, 2500)]) > 0}\n';
    await putRule(harness.store, { ...original, content: slow });
    try {
      const outcome = await eventually(async () => {
        const result = await harness.engine.decide('delegation', delegationInput(alice, ['view']));
        expect(result.engineError).to.equal('OPA did not answer in time');
        return result;
      });
      expect(outcome.decision).to.include({ allow: false, error: ENGINE_FAILURE_ERROR });
    } finally {
      await putRule(harness.store, original);
    }
    await eventually(async () =>
      expect((await harness.engine.decide('delegation', delegationInput(alice, ['view']))).decision.allow).to.equal(
        true,
      ),
    );
  });

  it('fails closed when OPA stops and recovers by itself when it is back', async function () {
    await stopOpa();
    const outage = await harness.engine.decide('authorize', authorizeInput('openid'));
    expect(outage.decision.allow).to.equal(false);
    expect(outage.engineError).to.match(/OPA/);
    expect(await harness.engine.isReady()).to.equal(false);
    await startOpa();
    await eventually(
      async () =>
        expect((await harness.engine.decide('authorize', authorizeInput('openid'))).decision.allow).to.equal(true),
      20_000,
    );
  });
});
