import bcrypt from 'bcryptjs';
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { artefactKey } from '../../adapters/oidc/index.js';
import { OIDC_COLLECTION } from '../../adapters/oidc/collection.js';
import {
  registerPublicClient,
  startRegisteredDevIdp,
  withSignInServer,
  type TestClient,
  signInForTokens,
  type UserTokens,
} from '../support/dev-idp.js';
import { basic, clientCredentials, confidentialClient, postForm, type JsonResponse } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';
import { api, UMA_GRANT, umaPublicClient, userToken } from '../uma/support.js';

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

  /** Replaces an Admin API record (`/clients/<id>`, `/identity-providers/<id>`) with `enabled` set. */
  async function setEnabledAt(path: string, enabled: boolean): Promise<void> {
    const {
      id: _id,
      createdAt: _created,
      updatedAt: _updated,
      ...fields
    } = (await server.admin('GET', path)).body as Record<string, unknown>;
    const answer = await server.admin('PUT', path, { ...fields, enabled });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
  }
  const setEnabled = (clientId: string, enabled: boolean) => setEnabledAt(`/clients/${clientId}`, enabled);

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

  /**
   * A user's tokens hang on their grant, which the revocation deletes: a token a request (a refresh)
   * writes after the sweep names a grant that is gone, so the subject needs no epoch of its own.
   */
  describe("a user's tokens revoked while one is being issued", function () {
    const REDIRECT_URI = 'http://127.0.0.1:1/revocation-races/refresh';

    it('honours none written after the revocation swept the store (the subject record stays)', async function () {
      const spa = await registerPublicClient(server, REDIRECT_URI, { clientId: unique('web') });
      const login = unique('dan');
      const tokens = await signIn(spa, login);
      const subject = (
        (await server.admin('GET', `/subjects?q=${encodeURIComponent(login)}`)).body as {
          id: number;
        }[]
      )[0]!;
      // The access and refresh tokens as a request that looked the user up before the revocation
      // would write them after its sweep: taken from the store, put back once it has swept.
      const artefacts = server.store.collection(OIDC_COLLECTION, '_default');
      const written = await artefacts.getMany(
        ['AccessToken', 'RefreshToken'].flatMap((model) =>
          [tokens.access, tokens.refresh].map((value) => artefactKey(model, value)),
        ),
      );
      expect(written).to.have.length(2);
      expect((await server.admin('POST', `/subjects/${subject.id}/revoke-tokens`)).status).to.equal(200);
      for (const doc of written) await artefacts.insert(doc);

      await expectDead(tokens, spa);
      expect(await isActive((await signIn(spa, login)).access), 'a token of a new sign-in').to.equal(true);
    });
  });

  describe('an identity provider disabled', function () {
    const REDIRECT_URI = 'http://127.0.0.1:1/revocation-races/callback';

    it("takes its users' tokens with it, refresh included, and enabling it again revives nothing", async function () {
      const spa = await registerPublicClient(server, REDIRECT_URI, { clientId: unique('spa') });
      const idp = await startRegisteredDevIdp(server, { idpId: unique('idp') });
      try {
        const viaIdp = await signIn(spa, unique('ann'), { upstream_idp: idp.idpId });
        const viaDefault = await signIn(spa, unique('bob'));
        expect(await isActive(viaIdp.access)).to.equal(true);

        await setEnabledAt(`/identity-providers/${idp.idpId}`, false);
        await expectDead(viaIdp, spa);
        await setEnabledAt(`/identity-providers/${idp.idpId}`, true);
        await expectDead(viaIdp, spa);
        expect(await isActive(viaDefault.access), "another provider's user").to.equal(true);
      } finally {
        await idp.close();
      }
    });
  });

  describe('UMA delegations and requesting party tokens', function () {
    const RESOURCES = '/resource_registration/resource';
    let pat: string;
    let delegationToken: string;

    before(async function () {
      const app = await umaPublicClient(server, unique('photos-app'), 'http://127.0.0.1:1/revocation-races/photos');
      const owner = unique('alice');
      pat = await userToken(server, app, owner, { resource: 'urn:as:introspect', scope: 'openid uma_protection' });
      delegationToken = await userToken(server, app, owner, {
        resource: 'urn:as:delegation',
        scope: 'openid delegation_management',
      });
    });

    /** A resource of the owner, a client, and the owner's delegation of `view` on it to that client. */
    async function delegatedToClient(): Promise<{ resource: string; clientId: string; delegation: string }> {
      const registered = await api(server, 'POST', RESOURCES, pat, { name: 'Beach', resource_scopes: ['view'] });
      expect(registered.status, JSON.stringify(registered.body)).to.equal(201);
      const clientId = unique('grantee');
      await confidentialClient(server, clientId);
      const delegated = await api(server, 'POST', '/delegation', delegationToken, {
        grantee_type: 'client',
        grantee_client_id: clientId,
        resource_id: registered.body._id,
        scopes: ['view'],
        expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      });
      expect(delegated.status, JSON.stringify(delegated.body)).to.equal(201);
      return { resource: registered.body._id, clientId, delegation: delegated.body.delegation_id };
    }

    /** The client alone (no requesting party) redeems a ticket for `view` on the resource. */
    async function rptOf(clientId: string, resource: string): Promise<JsonResponse> {
      const ticket = await api(server, 'POST', '/permission', pat, {
        resource_id: resource,
        resource_scopes: ['view'],
      });
      expect(ticket.status, JSON.stringify(ticket.body)).to.equal(201);
      return postForm(
        server,
        '/token',
        { grant_type: UMA_GRANT, ticket: ticket.body.ticket },
        { Authorization: basic(clientId, `${clientId}-secret-value`) },
      );
    }

    const delegationStatus = async (id: string) =>
      (await api(server, 'GET', `/delegation/${id}`, delegationToken)).body.status;

    it('a delegation to a client dies with it: a client made again under its clientId gets no RPT through it', async function () {
      const { resource, clientId, delegation } = await delegatedToClient();
      const first = await rptOf(clientId, resource);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);

      expect((await server.admin('DELETE', `/clients/${clientId}`)).status).to.equal(204);
      await confidentialClient(server, clientId);
      const again = await rptOf(clientId, resource);
      expect(again.status, JSON.stringify(again.body)).to.equal(403);
      expect(await delegationStatus(delegation)).to.equal('revoked');
      expect(await isActive(first.body.access_token), 'the old RPT').to.equal(false);
    });

    it('an RPT permitting a deleted resource is inactive, and the delegations on it are revoked', async function () {
      const { resource, clientId, delegation } = await delegatedToClient();
      const rpt = await rptOf(clientId, resource);
      expect(rpt.status, JSON.stringify(rpt.body)).to.equal(200);
      expect(await isActive(rpt.body.access_token)).to.equal(true);

      expect((await api(server, 'DELETE', `${RESOURCES}/${resource}`, pat)).status).to.equal(204);
      expect(await isActive(rpt.body.access_token), 'the RPT of a deleted resource').to.equal(false);
      expect(await delegationStatus(delegation)).to.equal('revoked');
      // The client itself is untouched: its other tokens work.
      const own = await clientCredentials(server, clientId, `${clientId}-secret-value`);
      expect(await isActive(own.body.access_token), "the client's own token").to.equal(true);
    });
  });

  const signIn = (testClient: TestClient, login: string, extra: Record<string, string> = {}) =>
    signInForTokens(server, testClient, login, extra);

  /** Introspection inactive (access and refresh token), UserInfo 401, refresh invalid_grant. */
  async function expectDead(tokens: UserTokens, testClient: TestClient): Promise<void> {
    expect(await isActive(tokens.access), 'the access token').to.equal(false);
    expect(await isActive(tokens.refresh), 'the refresh token').to.equal(false);
    const userinfo = await server.request('/userinfo', { headers: { Authorization: `Bearer ${tokens.access}` } });
    expect(userinfo.status, 'UserInfo').to.equal(401);
    const refreshed: JsonResponse = await postForm(server, '/token', {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh,
      client_id: testClient.clientId,
    });
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(400);
    expect(refreshed.body.error).to.equal('invalid_grant');
  }
});
