import { expect } from 'chai';
import { POLICY_DATA } from '../../src/policy/index.js';
import { eventually, policyInForce, updateOauthData } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { putData } from './support.js';

/**
 * A policy change reaches the managed OPA by HTTP long polling (src/policy/bundle/route.ts): the
 * bundle endpoint answers OPA's held request as soon as the store's revision moves. The server
 * polls only every 30 s here, so a change in force within seconds can only be long polling's work.
 */
describe('policy propagation by long polling', function () {
  let server: TestServer;

  before(async function () {
    server = await readyServer({ POLICY_POLL_MIN_SECONDS: '30', POLICY_POLL_MAX_SECONDS: '30' });
    await policyInForce(server);
  });

  after(async function () {
    await server?.close();
  });

  it('puts a policy data change in force long before the next poll would', async function () {
    for (let round = 0; round < 3; round += 1) {
      const started = Date.now();
      await updateOauthData(server, (data) => {
        // A field the pack's data schema knows (policies/oauth/data.schema.json), changed each round.
        data.software_statements = { denylist: [`propagation-probe-${round}-${started}`] };
      });
      // Typically a few hundred milliseconds; the bound only has to be far below the 30 s poll.
      expect(Date.now() - started, `round ${round}`).to.be.below(10_000);
    }
  });
});

describe('/healthz when OPA refuses the bundle', function () {
  let server: TestServer;

  before(async function () {
    server = await readyServer({ POLICY_LAG_BOUND_SECONDS: '1' });
    await policyInForce(server);
  });

  after(async function () {
    await server?.close();
  });

  const health = async () => {
    const response = await server.request('/healthz');
    return { status: response.status, body: (await response.json()) as any };
  };

  it('is degraded (503) while OPA keeps an older revision than the store, and recovers', async function () {
    // Written around the Admin API (which would refuse it): data over a rule's path, which OPA refuses to activate.
    const bad = await putData(server.store, 'arbiter.token', { decision: { allow: true } });
    let seen: { status: number; body: any } | undefined;
    await eventually(async () => {
      seen = await health();
      return seen.status === 503;
    }, 20_000);
    expect(seen!.body.status).to.equal('degraded');
    expect(seen!.body.policy).to.match(/older revision/);
    expect(seen!.body.policyRevision.opa).to.not.equal(seen!.body.policyRevision.store);
    await server.store.collection(POLICY_DATA).delete(bad.id);
    await eventually(async () => (await health()).status === 200, 20_000);
  });
});
