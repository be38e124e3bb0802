import { expect } from 'chai';
import { openArbiterStore } from '../../src/collections.js';
import { randomUUID } from 'node:crypto';
import { createOidcAdapter, revokeArtefacts } from '../../adapters/oidc/index.js';
import { OIDC_COLLECTION } from '../../adapters/oidc/collection.js';
import { clientRecords } from '../../src/catalog/index.js';
import {
  registerPublicClient,
  startRegisteredDevIdp,
  withSignInServer,
  type RegisteredDevIdp,
  type TestClient,
  signInForTokens,
  type UserTokens,
} from '../support/dev-idp.js';
import { basic, clientCredentials, confidentialClient, postForm, type JsonResponse } from '../support/oauth.js';
import { inTenant, type TestServer } from '../support/server.js';

/**
 * Tokens die with their client and their user (issue 28, point 2). Disabling or deleting a
 * client (Admin API, RFC 7592 DELETE), deleting a subject or its identity provider, and the
 * Admin operations "revoke all tokens of this client / this subject" delete the grants, codes
 * and tokens from the shared store before the call is answered: introspection answers
 * `active: false`, refresh `invalid_grant`, UserInfo 401. Every check is through real HTTP on
 * the shared sign-in server (its default tenant has the development IdP), each client and user
 * named after this file.
 */
describe('Tokens die with their client and their user', function () {
  const REDIRECT_URI = 'http://127.0.0.1:1/tokens-die/callback';
  const RS = 'tokens-die-rs';
  let server: TestServer;
  let rsSecret: string;

  before(async function () {
    ({ server } = await withSignInServer());
    // A resource server entitled to introspect with its client credentials (the default pack's urn:as:introspect).
    rsSecret = await confidentialClient(server, RS, {
      scopes: ['introspection'],
      grantedResources: [{ type: 'urn:as:introspect', scopes: [] }],
    });
  });

  const unique = (prefix: string) => `tokens-die-${prefix}-${randomUUID().slice(0, 8)}`;

  /** POST /introspect by the resource server, with Basic credentials and, the second time, as a Bearer caller. */
  async function introspectBothWays(token: string): Promise<boolean[]> {
    const viaBasic = await postForm(server, '/introspect', { token }, { Authorization: basic(RS, rsSecret) });
    const bearer = await clientCredentials(server, RS, rsSecret, { scope: 'introspection' });
    const viaBearer = await postForm(
      server,
      '/introspect',
      { token },
      { Authorization: `Bearer ${bearer.body.access_token}` },
    );
    expect(viaBasic.status, JSON.stringify(viaBasic.body)).to.equal(200);
    expect(viaBearer.status, JSON.stringify(viaBearer.body)).to.equal(200);
    for (const answer of [viaBasic, viaBearer])
      if (!answer.body.active) expect(answer.body).to.deep.equal({ active: false });
    return [viaBasic.body.active, viaBearer.body.active];
  }

  async function serviceToken(clientId: string, secret: string): Promise<string> {
    const { status, body } = await clientCredentials(server, clientId, secret, { scope: 'read' });
    expect(status, JSON.stringify(body)).to.equal(200);
    return body.access_token;
  }

  describe('client_credentials tokens', function () {
    it('are inactive once their client is disabled, and stay so when it is enabled again', async function () {
      const clientId = unique('disabled');
      const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
      const token = await serviceToken(clientId, secret);
      expect(await introspectBothWays(token)).to.deep.equal([true, true]);

      const record = (await server.admin('GET', `/clients/${clientId}`)).body;
      const disabled = await server.admin(
        'PUT',
        `/clients/${clientId}`,
        withoutServerFields(record, { enabled: false }),
      );
      expect(disabled.status, JSON.stringify(disabled.body)).to.equal(200);
      expect(await introspectBothWays(token)).to.deep.equal([false, false]);

      const enabled = await server.admin('PUT', `/clients/${clientId}`, withoutServerFields(record, { enabled: true }));
      expect(enabled.status).to.equal(200);
      expect(await introspectBothWays(token), 'a revoked token does not come back').to.deep.equal([false, false]);
      expect(await introspectBothWays(await serviceToken(clientId, secret))).to.deep.equal([true, true]);
    });

    it('are inactive once their client is deleted, and a client made again under its id does not revive them', async function () {
      const clientId = unique('deleted');
      const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
      const token = await serviceToken(clientId, secret);
      expect((await server.admin('DELETE', `/clients/${clientId}`)).status).to.equal(204);
      expect(await introspectBothWays(token)).to.deep.equal([false, false]);

      await confidentialClient(server, clientId, { scopes: ['read'] });
      expect(await introspectBothWays(token)).to.deep.equal([false, false]);
    });

    it("are inactive once an operator revokes the client's tokens; the client keeps working and the call is audited", async function () {
      const clientId = unique('revoked');
      const other = unique('bystander');
      const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
      const otherSecret = await confidentialClient(server, other, { scopes: ['read'] });
      const tokens = [await serviceToken(clientId, secret), await serviceToken(clientId, secret)];
      const bystander = await serviceToken(other, otherSecret);

      const revoked = await server.admin('POST', `/clients/${clientId}/revoke-tokens`);
      expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
      expect(revoked.body).to.deep.equal({ revoked: 2 });
      for (const token of tokens) expect(await introspectBothWays(token)).to.deep.equal([false, false]);
      expect(await introspectBothWays(bystander), "another client's token").to.deep.equal([true, true]);
      expect(await introspectBothWays(await serviceToken(clientId, secret)), 'a new token').to.deep.equal([true, true]);

      const audit = await server.admin(
        'GET',
        `/audit-logs?endpoint=${encodeURIComponent(`/admin/api/clients/${clientId}/revoke-tokens`)}`,
      );
      expect(audit.body.content).to.have.length(1);
      expect(audit.body.content[0]).to.include({ method: 'POST', clientId, outcome: 'allow' });
    });

    // Found 2026-11-29: the sweep deleted what the client was issued while it ran, and one asking
    // without pause kept it going as long as it asked.
    it("keep what the client is issued while an operator's revocation sweeps, and the sweep ends", async function () {
      const clientId = unique('busy');
      const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
      const before = await serviceToken(clientId, secret);
      const duringSweep: string[] = [];
      const { store } = server;
      const collection = store.collection.bind(store);
      // Before each step of the sweep, the client is issued a token (a client asking without pause).
      store.collection = ((spec: Parameters<typeof collection>[0], tenant?: string) => {
        const opened = collection(spec, tenant);
        if ((typeof spec === 'string' ? spec : spec.name) !== OIDC_COLLECTION.name) return opened;
        return Object.assign(Object.create(opened) as typeof opened, {
          deleteMany: async (...args: Parameters<typeof opened.deleteMany>) => {
            if (args[0].clientId === clientId && duringSweep.length < 20)
              duringSweep.push(await serviceToken(clientId, secret));
            return opened.deleteMany(...args);
          },
        });
      }) as typeof store.collection;
      try {
        const revoked = await server.admin('POST', `/clients/${clientId}/revoke-tokens`);
        expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
        expect(revoked.body).to.deep.equal({ revoked: 1 });
      } finally {
        store.collection = collection;
      }
      expect(duringSweep.length, 'the sweep ended at its second step').to.equal(2);
      expect(await introspectBothWays(before)).to.deep.equal([false, false]);
      for (const token of duringSweep)
        expect(await introspectBothWays(token), 'issued meanwhile').to.deep.equal([true, true]);
    });

    it('are inactive when the client was disabled without the Admin API (a token written after the sweep)', async function () {
      const clientId = unique('raced');
      const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
      const token = await serviceToken(clientId, secret);
      // As if a token had been written while the client was being disabled: the record says
      // disabled, the token is still in the store. Introspection checks the client itself.
      const clients = clientRecords(server.store, '_default');
      const record = (await clients.findOne({ clientId }))!;
      await clients.upsert({ ...record, enabled: false });
      expect(await introspectBothWays(token)).to.deep.equal([false, false]);
    });
  });

  describe('tokens of a signed-in user', function () {
    let spa: TestClient;

    before(async function () {
      spa = await registerPublicClient(server, REDIRECT_URI, { clientId: unique('spa') });
    });

    it("die with an operator's revocation of the client: introspection inactive, refresh invalid_grant, UserInfo 401", async function () {
      const tokens = await signIn(spa, unique('ann'));
      await expectAlive(tokens);
      const revoked = await server.admin('POST', `/clients/${spa.clientId}/revoke-tokens`);
      expect(revoked.status).to.equal(200);
      // The grant, the access token and the refresh token at least.
      expect(revoked.body.revoked).to.be.at.least(3);
      await expectDead(tokens, spa);
    });

    it('a refresh token is inactive once its client may no longer refresh (found 2026-11-29: still active)', async function () {
      const tokens = await signIn(spa, unique('ben'));
      await expectAlive(tokens);
      const record = (await server.admin('GET', `/clients/${spa.clientId}`)).body;
      const narrowed = await server.admin(
        'PUT',
        `/clients/${spa.clientId}`,
        withoutServerFields(record, { grantTypes: ['authorization_code'] }),
      );
      expect(narrowed.status, JSON.stringify(narrowed.body)).to.equal(200);
      expect(await introspectBothWays(tokens.refresh), 'the refresh token').to.deep.equal([false, false]);
      expect((await refresh(tokens, spa)).status).to.equal(400);
      expect(await introspectBothWays(tokens.access), 'the access token still serves').to.deep.equal([true, true]);
      const restored = await server.admin('PUT', `/clients/${spa.clientId}`, withoutServerFields(record, {}));
      expect(restored.status, JSON.stringify(restored.body)).to.equal(200);
    });

    it('die with their client when it is deleted through RFC 7592 with its registration access token', async function () {
      const iat = await server.admin('POST', '/initial-access-tokens', { name: 'tokens-die', uses: 1 });
      const registered = await server.request('/register', {
        method: 'POST',
        headers: { Authorization: `Bearer ${iat.body.token}` },
        json: { redirect_uris: [REDIRECT_URI], scope: 'openid profile email' },
      });
      const client = (await registered.json()) as {
        client_id: string;
        client_secret: string;
        registration_access_token: string;
      };
      expect(registered.status, JSON.stringify(client)).to.equal(201);
      const dcr: TestClient = { clientId: client.client_id, redirectUri: REDIRECT_URI, secret: client.client_secret };
      const tokens = await signIn(dcr, unique('ivy'));
      await expectAlive(tokens);

      const deleted = await server.request(`/register/${client.client_id}`, {
        method: 'DELETE',
        headers: { Authorization: `Bearer ${client.registration_access_token}` },
      });
      expect(deleted.status).to.equal(204);
      await expectDead(tokens, dcr, 'invalid_client');
    });

    it('die with their subject when it is deleted, at every client; the other users keep theirs', async function () {
      const login = unique('bea');
      const other = await registerPublicClient(server, REDIRECT_URI, { clientId: unique('other-spa') });
      const atSpa = await signIn(spa, login);
      const atOther = await signIn(other, login);
      const bystander = await signIn(spa, unique('cid'));
      const subject = await subjectNamed(login);

      expect((await server.admin('DELETE', `/subjects/${subject.id}`)).status).to.equal(204);
      await expectDead(atSpa, spa);
      await expectDead(atOther, other);
      await expectAlive(bystander);
    });

    it("die with an operator's revocation of the subject, whose record stays", async function () {
      const login = unique('dee');
      const tokens = await signIn(spa, login);
      const subject = await subjectNamed(login);
      const revoked = await server.admin('POST', `/subjects/${subject.id}/revoke-tokens`);
      expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
      await expectDead(tokens, spa);
      expect((await server.admin('GET', `/subjects/${subject.id}`)).status).to.equal(200);

      const audit = await server.admin(
        'GET',
        `/audit-logs?endpoint=${encodeURIComponent(`/admin/api/subjects/${subject.id}/revoke-tokens`)}`,
      );
      expect(audit.body.content[0]).to.include({ subjectId: login, outcome: 'allow' });
    });

    it('die when their subject is renamed (a new subjectId is another user)', async function () {
      const login = unique('gil');
      const tokens = await signIn(spa, login);
      const subject = await subjectNamed(login);
      const record = (await server.admin('GET', `/subjects/${subject.id}`)).body;
      const renamed = await server.admin(
        'PUT',
        `/subjects/${subject.id}`,
        subjectBody(record, { subjectId: `${login}-renamed` }),
      );
      expect(renamed.status, JSON.stringify(renamed.body)).to.equal(200);
      await expectDead(tokens, spa);
      const unchanged = await signIn(spa, unique('hal'));
      const other = await subjectNamed((await introspected(unchanged.access)).sub);
      const kept = (await server.admin('GET', `/subjects/${other.id}`)).body;
      expect((await server.admin('PUT', `/subjects/${other.id}`, subjectBody(kept, { name: 'Hal' }))).status).to.equal(
        200,
      );
      await expectAlive(unchanged);
    });

    it('die with the identity provider that signed their user in', async function () {
      const idp: RegisteredDevIdp = await startRegisteredDevIdp(server, { idpId: unique('idp') });
      try {
        const viaIdp = await signIn(spa, unique('eve'), { upstream_idp: idp.idpId });
        const viaDefault = await signIn(spa, unique('fay'));
        expect((await server.admin('DELETE', `/identity-providers/${idp.idpId}`)).status).to.equal(204);
        await expectDead(viaIdp, spa);
        await expectAlive(viaDefault);
      } finally {
        await idp.close();
      }
    });

    const signIn = (testClient: TestClient, login: string, extra: Record<string, string> = {}) =>
      signInForTokens(server, testClient, login, extra);

    async function introspected(token: string): Promise<{ sub: string }> {
      return (await postForm(server, '/introspect', { token }, { Authorization: basic(RS, rsSecret) })).body;
    }

    async function subjectNamed(login: string): Promise<{ id: number }> {
      const subjects = (await server.admin('GET', '/subjects')).body as { id: number; subjectId: string }[];
      const subject = subjects.find((each) => each.subjectId === login);
      expect(subject, login).not.to.equal(undefined);
      return subject!;
    }

    const userinfo = (token: string) =>
      server
        .request('/userinfo', { headers: { Authorization: `Bearer ${token}` } })
        .then((response) => response.status);
    const refresh = (tokens: UserTokens, testClient: TestClient): Promise<JsonResponse> =>
      postForm(
        server,
        '/token',
        {
          grant_type: 'refresh_token',
          refresh_token: tokens.refresh,
          ...(testClient.secret ? {} : { client_id: testClient.clientId }),
        },
        testClient.secret ? { Authorization: basic(testClient.clientId, testClient.secret) } : {},
      );

    /** Introspection active, UserInfo 200 (the refresh token is checked by introspection, not used). */
    async function expectAlive(tokens: UserTokens): Promise<void> {
      expect(await introspectBothWays(tokens.access)).to.deep.equal([true, true]);
      expect(await introspectBothWays(tokens.refresh)).to.deep.equal([true, true]);
      expect(await userinfo(tokens.access)).to.equal(200);
    }

    /** Refresh answers `refreshError`: invalid_grant, or invalid_client when the client itself is gone. */
    async function expectDead(
      tokens: UserTokens,
      testClient: TestClient,
      refreshError = 'invalid_grant',
    ): Promise<void> {
      expect(await introspectBothWays(tokens.access), 'the access token').to.deep.equal([false, false]);
      expect(await introspectBothWays(tokens.refresh), 'the refresh token').to.deep.equal([false, false]);
      expect(await userinfo(tokens.access)).to.equal(401);
      const refreshed = await refresh(tokens, testClient);
      expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(refreshError === 'invalid_client' ? 401 : 400);
      expect(refreshed.body.error).to.equal(refreshError);
    }
  });

  describe('hostile and cross-tenant calls', function () {
    it('revoke nothing of a same-named client in another tenant, and answer 404 for an unknown record', async function () {
      const clientId = unique('twin');
      const tenant = unique('tenant');
      const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
      const tenantSecret = await confidentialClient(server, clientId, { scopes: ['read'] }, tenant);
      const here = await serviceToken(clientId, secret);
      const there = await clientCredentials(
        server,
        clientId,
        tenantSecret,
        { scope: 'read' },
        { 'X-Tenant-Id': tenant },
      );
      expect(there.status).to.equal(200);

      const revoked = await inTenant(server, tenant).admin('POST', `/clients/${clientId}/revoke-tokens`);
      expect(revoked.body).to.deep.equal({ revoked: 1 });
      expect(await introspectBothWays(here), 'the default tenant keeps its token').to.deep.equal([true, true]);

      for (const path of [
        `/clients/${unique('nobody')}/revoke-tokens`,
        '/subjects/999999999/revoke-tokens',
        '/subjects/not-a-number/revoke-tokens',
      ]) {
        const answer = await server.admin('POST', path);
        expect(answer.status, path).to.equal(404);
        expect(answer.body.error).to.equal('not_found');
      }
      const unauthenticated = await server.request(`/admin/api/clients/${clientId}/revoke-tokens`, { method: 'POST' });
      expect(unauthenticated.status).to.equal(401);
      expect(await introspectBothWays(here)).to.deep.equal([true, true]);
    });
  });

  describe('the store adapter', function () {
    it('revokes artefacts written before their client and user were kept top-level (upgraded on first use)', async function () {
      const tenant = unique('legacy');
      const artefacts = server.store.collection(OIDC_COLLECTION, tenant);
      const legacy = (id: string, payload: Record<string, unknown>) =>
        artefacts.insert({
          id,
          model: payload.kind as string,
          payload,
          grantId: (payload.grantId as string) ?? null,
          uid: null,
          userCode: null,
          expiresAt: Date.now() + 60_000,
          idDigest: 'sha256',
          hadJti: true,
        });
      await legacy('AccessToken:a', { kind: 'AccessToken', clientId: 'old-app', accountId: 'gus', grantId: 'g1' });
      await legacy('ClientCredentials:b', { kind: 'ClientCredentials', clientId: 'old-app' });
      await legacy('AccessToken:c', { kind: 'AccessToken', clientId: 'new-app', accountId: 'gus', grantId: 'g2' });
      await legacy('Session:d', { kind: 'Session', accountId: 'gus' });
      await legacy('AccessToken:e', { kind: 'AccessToken', clientId: 'new-app', accountId: 'hal', grantId: 'g3' });

      expect(await revokeArtefacts(server.store, tenant, { clientId: 'old-app' })).to.equal(2);
      expect(await revokeArtefacts(server.store, tenant, { accountId: 'gus' })).to.equal(2);
      expect((await artefacts.find()).map((doc) => doc.id)).to.deep.equal(['AccessToken:e']);

      // Found 2026-11-29: every process searched every artefact of each tenant again (812 ms of the event loop
      // at 300,000 tokens). Once none is old, another process (another store object) searches no more.
      await legacy('AccessToken:late', { kind: 'AccessToken', clientId: 'late-app', accountId: 'ivy', grantId: 'g9' });
      const another = await openArbiterStore(server.config.storeUrl);
      try {
        expect(await revokeArtefacts(another, tenant, { clientId: 'late-app' }), 'not searched for').to.equal(0);
      } finally {
        await another.close();
      }
      await artefacts.delete('AccessToken:late');

      // Artefacts written now carry both, and an adapter of another tenant revokes nothing here.
      const Adapter = createOidcAdapter(server.store, tenant);
      await new Adapter('RefreshToken').upsert(
        'value',
        { kind: 'RefreshToken', clientId: 'new-app', accountId: 'hal' },
        60,
      );
      expect(await revokeArtefacts(server.store, unique('elsewhere'), { accountId: 'hal' })).to.equal(0);
      expect(await revokeArtefacts(server.store, tenant, { accountId: 'hal' })).to.equal(2);
    });
  });
});

/** A subject as a replace body: the fields of the Admin API's schema (a signed-in subject has more, e.g. emailVerified). */
function subjectBody(record: Record<string, unknown>, changes: Record<string, unknown>): Record<string, unknown> {
  const fields = ['subjectId', 'identityProviderId', 'name', 'email', 'preferredUsername'];
  return {
    ...Object.fromEntries(fields.filter((field) => field in record).map((field) => [field, record[field]])),
    ...changes,
  };
}

/** A record as the Admin API answered it, as a replace body: without the fields the server sets. */
function withoutServerFields(
  record: Record<string, unknown>,
  changes: Record<string, unknown>,
): Record<string, unknown> {
  const { id: _id, createdAt: _created, updatedAt: _updated, ...fields } = record;
  return { ...fields, ...changes };
}
