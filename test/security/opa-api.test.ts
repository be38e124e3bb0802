import { expect } from 'chai';
import { createOutbound } from '../../src/http/outbound.js';
import { authorizeInput } from '../policy/inputs.js';
import { startPolicyHarness, type PolicyHarness } from '../policy/support.js';

/**
 * The managed OPA listens on 127.0.0.1, where any local process (or a server-side request a
 * caller steers there) could read every policy and data document and write data outside the
 * bundle's roots. It answers only requests bearing the token Arbiter gave it at start.
 */
describe("The managed OPA's REST API", function () {
  let harness: PolicyHarness;
  before(async function () {
    // Every decision goes to OPA (not to the bundle compiled into this process), so that it shows the token works.
    harness = await startPolicyHarness({ POLICY_REGO_IN_PROCESS: 'false' });
  });
  after(async function () {
    await harness?.close();
  });

  const probes: [string, string, string?][] = [
    ['GET', '/v1/policies'],
    ['GET', '/v1/data/oauth'],
    ['PUT', '/v1/data/probe_test', '{"written":true}'],
    ['POST', '/v1/data/arbiter/authorize/decision', '{"input":{}}'],
    ['GET', '/health?bundles'],
  ];

  for (const [method, path, body] of probes) {
    it(`answers ${method} ${path} without the token, or with a wrong one, 401`, async function () {
      for (const authorization of [
        undefined,
        'Bearer not-the-token',
        `Basic ${Buffer.from('a:b').toString('base64')}`,
      ]) {
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          ...(authorization ? { authorization } : {}),
        };
        const response = await fetch(`${harness.engine.opaUrl}${path}`, { method, headers, body });
        expect(response.status, String(authorization)).to.equal(401);
      }
    });
  }

  it('refuses what an upstream issuer URL such as http://0x7f.1:<OPA port> fetches through the outbound guard in development', async function () {
    // Development allows loopback destinations (OUTBOUND_ALLOW_INSECURE_LOOPBACK), so the guard lets this through: OPA must refuse it.
    const outbound = createOutbound({ allowInsecureLoopback: true, timeoutMs: 5_000, maxResponseBytes: 1_000_000 });
    const oddSpelling = harness.engine.opaUrl.replace('127.0.0.1', '0x7f.1');
    expect((await outbound.fetch(`${oddSpelling}/v1/data/oauth`)).status).to.equal(401);
    expect((await outbound.fetch(`${oddSpelling}/v1/policies`)).status).to.equal(401);
  });

  it("still answers Arbiter's decisions, health and revision checks, which bear the token", async function () {
    const outcome = await harness.engine.decide('authorize', authorizeInput('openid'));
    expect(outcome.engineError).to.equal(undefined);
    expect(outcome.decision.allow).to.equal(true);
    expect(await harness.engine.isReady()).to.equal(true);
    expect((await harness.engine.revisions()).opa).to.be.a('string');
  });
});
