import { withSignInServer } from '../support/dev-idp.js';
import type { TestServer } from '../support/server.js';
import { verifyDiscovery } from './discovery-verification.js';

/**
 * The OpenID Foundation's `oidcc-config-certification-test-plan` (discovery, static client): its
 * one module, oidcc-discovery-endpoint-verification, checks the discovery document an RP reads
 * (verifyDiscovery).
 */
describe('oidcc-config-certification-test-plan (discovery, static client)', () => {
  let server: TestServer;

  before(async () => {
    ({ server } = await withSignInServer());
  });

  it('oidcc-discovery-endpoint-verification', () => verifyDiscovery(server));
});
