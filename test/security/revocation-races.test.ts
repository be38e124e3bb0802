import bcrypt from 'bcryptjs';
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { withSignInServer } from '../support/dev-idp.js';
import { basic, clientCredentials, confidentialClient, postForm } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';

/**
 * Nothing outlives what it hangs on (issue 33, points 5, 11, 12), through real HTTP on the shared
 * sign-in server. A token answered while its client is being disabled is not honoured once the
 * client is enabled again (the client's token epoch moved on, whatever the order of the token's
 * write and the revocation's sweep).
 */
describe('Revocation races: nothing outlives what it hangs on', function () {
  const RS = `revocation-races-rs-${randomUUID().slice(0, 8)}`;
  let server: TestServer;
  let rsSecret: string;

  before(async function () {
    ({ server } = await withSignInServer());
    rsSecret = await confidentialClient(server, RS, {
      scopes: ['introspection'],
      grantedResources: [{ type: 'urn:as:introspect', scopes: [] }],
    });
  });

  const unique = (prefix: string) => `revocation-races-${prefix}-${randomUUID().slice(0, 8)}`;

  async function isActive(token: string): Promise<boolean> {
    const answer = await postForm(server, '/introspect', { token }, { Authorization: basic(RS, rsSecret) });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.active === true;
  }

  /** The Admin API's client record as a replace body, with `enabled` set. */
  async function setEnabled(clientId: string, enabled: boolean): Promise<void> {
    const {
      id: _id,
      createdAt: _created,
      updatedAt: _updated,
      ...fields
    } = (await server.admin('GET', `/clients/${clientId}`)).body as Record<string, unknown>;
    const answer = await server.admin('PUT', `/clients/${clientId}`, { ...fields, enabled });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
  }

  describe('a client disabled while tokens are being issued to it', function () {
    const ROUNDS = 4;
    const CONCURRENT = 24;

    it(`honours none of them once it is enabled again (${ROUNDS} rounds of ${CONCURRENT} token requests)`, async function () {
      this.timeout(240_000);
      let issued = 0;
      const revived: string[] = [];
      for (let round = 0; round < ROUNDS; round += 1) {
        const clientId = unique(`race-${round}`);
        // A costly secret hash: each request spends a while between its client lookup and its token's write.
        const secret = `${clientId}-secret`;
        await confidentialClient(server, clientId, { scopes: ['read'], clientSecret: bcrypt.hashSync(secret, 9) });
        const ask = () => clientCredentials(server, clientId, secret, { scope: 'read' });
        // The disable goes out among the token requests: half of them sent before, half after.
        const before = Array.from({ length: CONCURRENT / 2 }, ask);
        const disabling = setEnabled(clientId, false);
        const after = Array.from({ length: CONCURRENT / 2 }, ask);
        const answers = await Promise.all([...before, ...after]);
        await disabling;
        await setEnabled(clientId, true);
        const tokens = answers.filter((answer) => answer.status === 200).map((answer) => answer.body.access_token);
        issued += tokens.length;
        for (const token of tokens) if (await isActive(token)) revived.push(token);
        // The client works again: a token issued now is honoured.
        const fresh = await clientCredentials(server, clientId, secret, { scope: 'read' });
        expect(fresh.status, JSON.stringify(fresh.body)).to.equal(200);
        expect(await isActive(fresh.body.access_token), 'a token issued after enabling it again').to.equal(true);
      }
      expect(issued, 'tokens answered around the disable').to.be.greaterThan(ROUNDS);
      expect(revived.length, `${revived.length} of ${issued} tokens active after enabling again`).to.equal(0);
    });
  });
});
