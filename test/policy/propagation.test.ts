import { expect } from 'chai';
import { policyInForce, updateOauthData } from '../support/oauth.js';
import { startTestServer, type TestServer } from '../support/server.js';

/**
 * A policy change reaches the managed OPA by HTTP long polling (src/policy/bundle-route.ts): the
 * bundle endpoint answers OPA's held request as soon as the store's revision moves. The server
 * polls only every 30 s here, so a change in force within seconds can only be long polling's work.
 */
describe('policy propagation by long polling', function () {
  let server: TestServer;

  before(async function () {
    server = await startTestServer({ POLICY_POLL_MIN_SECONDS: '30', POLICY_POLL_MAX_SECONDS: '30' });
    await server.waitUntilReady();
    await policyInForce(server);
  });

  after(async function () {
    await server?.close();
  });

  it('puts a policy data change in force long before the next poll would', async function () {
    for (let round = 0; round < 3; round += 1) {
      const started = Date.now();
      await updateOauthData(server, (data) => {
        data.propagation_probe = { round, at: started };
      });
      // Typically a few hundred milliseconds; the bound only has to be far below the 30 s poll.
      expect(Date.now() - started, `round ${round}`).to.be.below(10_000);
    }
  });
});
