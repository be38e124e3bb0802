import bcrypt from 'bcryptjs';
import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { randomUUID } from 'node:crypto';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerPublicClient,
  withSignInServer,
  type TestClient,
} from '../support/dev-idp.js';
import { basic, clientToken, confidentialClient, FORM, postForm, type JsonResponse } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';

/**
 * POST /revoke (RFC 7009): the client authentication of /token, access and refresh tokens, a
 * refresh token's revocation ending its grant's tokens, 200 for what it does not know, and only
 * a client's own tokens in its own tenant.
 */
describe('POST /revoke (RFC 7009)', function () {
  const OTHER_TENANT = 'revocation-b';
  let server: TestServer;
  let svcSecret: string;
  let otherSecret: string;
  let rsToken: string;
  let spa: TestClient;
  let web: TestClient;

  before(async function () {
    ({ server } = await withSignInServer());
    svcSecret = await confidentialClient(server, 'rv-svc', { scopes: ['read'] });
    otherSecret = await confidentialClient(server, 'rv-other', { scopes: ['read'] });
    const rsSecret = await confidentialClient(server, 'rv-rs', { scopes: ['introspection'] });
    rsToken = await clientToken(server, 'rv-rs', rsSecret, { scope: 'introspection' });
    spa = await registerPublicClient(server, 'http://127.0.0.1:1/revocation/spa', { clientId: 'rv-spa' });
    const webRedirect = 'http://127.0.0.1:1/revocation/web';
    const webSecret = await confidentialClient(server, 'rv-web', {
      redirectUris: [webRedirect],
      scopes: ['openid', 'profile', 'email'],
    });
    web = { clientId: 'rv-web', redirectUri: webRedirect, secret: webSecret };
  });

  const svcToken = () => clientToken(server, 'rv-svc', svcSecret, { scope: 'read' });
  const revoke = (form: Record<string, string>, headers: Record<string, string> = {}) =>
    postForm(server, '/revoke', form, headers);
  const asSvc = () => ({ Authorization: basic('rv-svc', svcSecret) });

  /** Whether the token is active, as a resource server introspecting it sees it. */
  async function isActive(token: string): Promise<boolean> {
    const { status, body } = await postForm(server, '/introspect', { token }, { Authorization: `Bearer ${rsToken}` });
    expect(status, JSON.stringify(body)).to.equal(200);
    return body.active === true;
  }

  /** alice signed in through `testClient`: its access and refresh tokens. */
  async function signedIn(testClient: TestClient): Promise<{ access_token: string; refresh_token: string }> {
    const request = await authorizationRequest(server, testClient);
    const agent = new FetchUserAgent();
    const login = await agent.navigate(request.url, arrivingAt(testClient.redirectUri));
    const landed = await passDevIdpForms(agent, login, 'alice', arrivingAt(testClient.redirectUri));
    const { status, body } = await redeemCode(
      server,
      testClient,
      landed.url.searchParams.get('code')!,
      request.codeVerifier,
    );
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.refresh_token, 'a refresh token comes with the code').to.be.a('string');
    return body;
  }

  function refresh(testClient: TestClient, refreshToken: string): Promise<JsonResponse> {
    const form = { grant_type: 'refresh_token', refresh_token: refreshToken };
    return testClient.secret
      ? postForm(server, '/token', form, { Authorization: basic(testClient.clientId, testClient.secret) })
      : postForm(server, '/token', { ...form, client_id: testClient.clientId });
  }

  describe('what it revokes', function () {
    it("revokes a client's own access token: 200, an empty body, no-store", async function () {
      const token = await svcToken();
      expect(await isActive(token)).to.equal(true);

      const { status, body, headers } = await revoke({ token }, asSvc());

      expect(status).to.equal(200);
      expect(body).to.equal(undefined);
      expect(headers.get('cache-control')).to.equal('no-store');
      expect(headers.get('pragma')).to.equal('no-cache');
      expect(await isActive(token), 'the token is no longer active').to.equal(false);
    });

    it("revokes a refresh token and with it every token of its grant (RFC 7009 §2.1), with the client's secret", async function () {
      const first = await signedIn(web);
      const refreshed = await refresh(web, first.refresh_token);
      expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
      const other = await signedIn(web);

      const { status } = await revoke(
        { token: first.refresh_token, token_type_hint: 'refresh_token' },
        { Authorization: basic(web.clientId, web.secret!) },
      );

      expect(status).to.equal(200);
      expect(await isActive(first.refresh_token), 'the refresh token').to.equal(false);
      expect(await isActive(first.access_token), 'the access token issued with it').to.equal(false);
      expect(await isActive(refreshed.body.access_token), 'the access token refreshed from it').to.equal(false);
      expect((await refresh(web, first.refresh_token)).body.error).to.equal('invalid_grant');
      expect(await isActive(other.access_token), 'another sign-in (another grant) is untouched').to.equal(true);
      expect(await isActive(other.refresh_token)).to.equal(true);
    });

    it('lets a public client revoke its own refresh token by client_id alone, rotated ones included', async function () {
      const tokens = await signedIn(spa);
      const rotated = await refresh(spa, tokens.refresh_token);
      expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);

      const { status } = await revoke({ token: rotated.body.refresh_token, client_id: spa.clientId });

      expect(status).to.equal(200);
      expect((await refresh(spa, rotated.body.refresh_token)).body.error).to.equal('invalid_grant');
      expect(await isActive(rotated.body.access_token)).to.equal(false);
    });

    it("revokes an access token of a sign-in, and (oidc-provider's choice, RFC 7009 §2.1 MAY) its grant's refresh token", async function () {
      const tokens = await signedIn(web);

      const { status } = await revoke(
        { token: tokens.access_token, token_type_hint: 'access_token' },
        { Authorization: basic(web.clientId, web.secret!) },
      );

      expect(status).to.equal(200);
      expect(await isActive(tokens.access_token)).to.equal(false);
      expect((await refresh(web, tokens.refresh_token)).body.error).to.equal('invalid_grant');
    });

    it('honours token_type_hint without trusting it: a wrong or unknown hint still finds the token', async function () {
      const wrongHint = await svcToken();
      expect((await revoke({ token: wrongHint, token_type_hint: 'refresh_token' }, asSvc())).status).to.equal(200);
      expect(await isActive(wrongHint)).to.equal(false);

      const unknownHint = await svcToken();
      expect((await revoke({ token: unknownHint, token_type_hint: 'id_token' }, asSvc())).status).to.equal(200);
      expect(await isActive(unknownHint)).to.equal(false);
    });

    it('answers 200 for a token it does not know, and for one already revoked (RFC 7009 §2.2)', async function () {
      expect((await revoke({ token: 'no-such-token' }, asSvc())).status).to.equal(200);
      const token = await svcToken();
      expect((await revoke({ token }, asSvc())).status).to.equal(200);
      expect((await revoke({ token }, asSvc())).status).to.equal(200);
    });

    it('authenticates private_key_jwt clients, each assertion once', async function () {
      const { publicKey, privateKey } = await generateKeyPair('RS256');
      const jwk = { ...(await exportJWK(publicKey)), kid: 'rv-key', alg: 'RS256', use: 'sig' };
      await server.admin('POST', '/clients', {
        clientId: 'rv-jwt',
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'private_key_jwt',
        jwks: { keys: [jwk] },
        scopes: ['read'],
      });
      const assertion = (audience: string) =>
        new SignJWT({ jti: randomUUID() })
          .setProtectedHeader({ alg: 'RS256', kid: 'rv-key' })
          .setIssuer('rv-jwt')
          .setSubject('rv-jwt')
          .setAudience(audience)
          .setIssuedAt()
          .setExpirationTime('1m')
          .sign(privateKey);
      const asJwt = async (audience: string) => ({
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: await assertion(audience),
      });
      const issued = await postForm(server, '/token', {
        grant_type: 'client_credentials',
        scope: 'read',
        ...(await asJwt(server.config.issuer)),
      });
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);

      const revoked = await revoke({ token: issued.body.access_token, ...(await asJwt(server.config.issuer)) });

      expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
      expect(await isActive(issued.body.access_token)).to.equal(false);
    });

    it('is advertised: revocation_endpoint and the methods it authenticates clients with', async function () {
      const discovery = (await (await server.request('/.well-known/openid-configuration')).json()) as any;
      expect(discovery.revocation_endpoint).to.equal(`${server.config.issuer}/revoke`);
      expect(discovery.revocation_endpoint_auth_methods_supported).to.deep.equal(
        discovery.token_endpoint_auth_methods_supported,
      );
      expect(discovery.revocation_endpoint_auth_methods_supported).to.include.members([
        'client_secret_basic',
        'client_secret_post',
        'private_key_jwt',
        'none',
      ]);
    });
  });

  describe('what it refuses', function () {
    it("does not revoke another client's token: 400 unauthorized_client to a confidential client, 200 to a public one", async function () {
      const token = await svcToken();

      const confidential = await revoke({ token }, { Authorization: basic('rv-other', otherSecret) });
      expect(confidential.status).to.equal(400);
      expect(confidential.body.error).to.equal('unauthorized_client');
      expect(await isActive(token), 'after a confidential client tried').to.equal(true);

      const publicClient = await revoke({ token, client_id: spa.clientId });
      expect(publicClient.status, 'a public client learns nothing about the token').to.equal(200);
      expect(await isActive(token), 'after a public client tried').to.equal(true);
    });

    it('answers a wrong secret and an unknown client with 401 invalid_client and a Basic challenge', async function () {
      const token = await svcToken();
      for (const authorization of [basic('rv-svc', 'not-the-secret'), basic('rv-nobody', 'whatever')]) {
        const { status, body, headers } = await revoke({ token }, { Authorization: authorization });
        expect(status).to.equal(401);
        expect(body.error).to.equal('invalid_client');
        expect(headers.get('www-authenticate')).to.match(/^Basic realm=/);
      }
      expect(await isActive(token)).to.equal(true);
    });

    it('answers a request with no client credential at all with 401 invalid_client and a challenge (RFC 6749 §5.2)', async function () {
      const token = await svcToken();
      const { status, body, headers } = await revoke({ token });
      expect(status).to.equal(401);
      expect(body.error).to.equal('invalid_client');
      expect(headers.get('www-authenticate')).to.equal(`Basic realm="${server.config.issuer}"`);
      expect(await isActive(token)).to.equal(true);
    });

    it("applies /revoke's own steps at every spelling oidc-provider routes there (/REVOKE, /revoke/)", async function () {
      for (const path of ['/REVOKE', '/revoke/']) {
        const { status, body } = await postForm(server, path, { token: 'no-such-token' });
        expect(status, path).to.equal(401);
        expect(body.error).to.equal('invalid_client');
      }
    });

    it('holds a client to the method it registered: client_secret_basic may not post its secret', async function () {
      const token = await svcToken();
      const { status, body } = await revoke({ token, client_id: 'rv-svc', client_secret: svcSecret });
      expect(status).to.equal(401);
      expect(body.error).to.equal('invalid_client');
      expect(await isActive(token)).to.equal(true);
    });

    it('refuses a missing or repeated token with 400 invalid_request, and a JWT with unsupported_token_type', async function () {
      const missing = await revoke({}, asSvc());
      expect(missing.status).to.equal(400);
      expect(missing.body.error).to.equal('invalid_request');

      const token = await svcToken();
      const response = await server.request('/revoke', {
        method: 'POST',
        headers: { ...FORM, ...asSvc() },
        body: `token=${token}&token=${token}`,
      });
      expect(response.status).to.equal(400);
      expect(((await response.json()) as any).error).to.equal('invalid_request');
      expect(await isActive(token)).to.equal(true);

      // Arbiter's tokens are opaque; a JWT (an ID token, say) is not one it can revoke (RFC 7009 §2.2.1).
      const jwt = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from('{}').toString('base64url')}.`;
      const structured = await revoke({ token: jwt }, asSvc());
      expect(structured.status).to.equal(400);
      expect(structured.body.error).to.equal('unsupported_token_type');
    });

    it('refuses a body over MAX_BODY_BYTES with 413, before any client authentication', async function () {
      const response = await server.request('/revoke', {
        method: 'POST',
        headers: { ...FORM, ...asSvc() },
        body: `token=${'a'.repeat(server.config.maxBodyBytes)}`,
      });
      expect(response.status).to.equal(413);
      await response.body?.cancel();
    });

    it("does nothing to a tenant's token revoked through another tenant, even by a client of the same id", async function () {
      const token = await svcToken();
      // The same client id in the other tenant, with a secret of its own.
      const elsewhereSecret = 'rv-svc-secret-of-the-other-tenant';
      const created = await server.admin('POST', '/clients', {
        clientId: 'rv-svc',
        clientType: 'confidential',
        clientSecret: bcrypt.hashSync(elsewhereSecret, 4),
        scopes: ['read'],
        tenantId: OTHER_TENANT,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);

      const { status, body } = await revoke(
        { token },
        { Authorization: basic('rv-svc', elsewhereSecret), 'X-Tenant-Id': OTHER_TENANT },
      );

      expect(status, JSON.stringify(body)).to.equal(200);
      expect(await isActive(token), 'still active in its own tenant').to.equal(true);
      const wrongSecret = await revoke({ token }, { ...asSvc(), 'X-Tenant-Id': OTHER_TENANT });
      expect(wrongSecret.status, "the first tenant's secret means nothing in the other").to.equal(401);
    });
  });

  it('is audited: the client, whose token, its type and whether it was revoked, never the token', async function () {
    const requestId = `revocation-audit-${randomUUID()}`;
    const tokens = await signedIn(web);
    await revoke(
      { token: tokens.refresh_token },
      { Authorization: basic(web.clientId, web.secret!), 'X-Request-Id': requestId },
    );
    const foreign = await svcToken();
    await revoke(
      { token: foreign },
      { Authorization: basic('rv-other', otherSecret), 'X-Request-Id': `${requestId}-2` },
    );
    await revoke({ token: 'no-such-token' }, { ...asSvc(), 'X-Request-Id': `${requestId}-3` });

    const entries = (await server.admin('GET', '/audit-logs?endpoint=/revoke&size=50')).body.content as any[];
    const entry = (id: string) => entries.find((candidate) => candidate.requestId === id);
    expect(entry(requestId)).to.deep.include({ clientId: 'rv-web', subjectId: 'alice', outcome: 'allow' });
    expect(entry(requestId).requestSummary).to.deep.include({
      status: 200,
      result: { token_type: 'refresh_token', token_client_id: 'rv-web', revoked: true, grant_tokens_revoked: true },
    });
    expect(entry(`${requestId}-2`)).to.deep.include({ clientId: 'rv-other', outcome: 'deny' });
    expect(entry(`${requestId}-2`).requestSummary.result).to.deep.include({
      revoked: false,
      token_client_id: 'rv-svc',
    });
    expect(entry(`${requestId}-3`).requestSummary.result).to.deep.include({ revoked: false });
    const written = JSON.stringify(entries);
    expect(written).not.to.include(tokens.refresh_token);
    expect(written).not.to.include(foreign);
  });
});
