import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { randomUUID } from 'node:crypto';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { inProcess } from '../support/in-process.js';
import { rawRequest } from '../support/raw-http.js';
import { withServer, type TestServer } from '../support/server.js';

describe('POST /token', function () {
  let server: TestServer;
  let secret: string;

  before(async function () {
    server = inProcess(await withServer());
    secret = await confidentialClient(server, 'token-svc', { scopes: ['read', 'write'] });
  });

  it('answers a request that names no client at all 401 invalid_client with a Basic challenge (RFC 6749 §5.2)', async function () {
    const { status, body, headers } = await postForm(server, '/token', { grant_type: 'client_credentials' });
    expect(status).to.equal(401);
    expect(body.error).to.equal('invalid_client');
    expect(headers.get('www-authenticate')).to.match(/^Basic realm="/);
    const publicClient = await postForm(server, '/token', {
      grant_type: 'authorization_code',
      code: 'no-such-code',
      redirect_uri: 'http://127.0.0.1:1/cb',
      client_id: 'no-such-public-client',
    });
    expect(publicClient.status, 'a client_id names a (public) client: authenticated as usual').to.equal(401);
    expect(publicClient.body.error).to.equal('invalid_client');
    expect(
      publicClient.headers.get('www-authenticate'),
      'refused by oidc-provider, not by the presence check',
    ).to.equal(null);
  });

  describe('client_credentials, decided by policy', function () {
    it('issues an opaque bearer token with client_secret_basic, within the registered scopes, with no-store headers', async function () {
      const { status, body, headers } = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('token-svc', secret) },
      );
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body).to.include({ token_type: 'Bearer', scope: 'read' });
      // Opaque, not a JWT (a random value may start with "ey" too: no dots is what tells them apart).
      expect(body.access_token)
        .to.be.a('string')
        .and.match(/^[A-Za-z0-9_-]+$/);
      expect(body.expires_in).to.be.a('number');
      expect(body).not.to.have.property('refresh_token');
      expect(body).not.to.have.property('id_token');
      expect(headers.get('cache-control')).to.equal('no-store');
      expect(headers.get('pragma')).to.equal('no-cache');
    });

    it('accepts client_secret_post from a client registered for it', async function () {
      const postSecret = await confidentialClient(server, 'token-svc-post', {
        scopes: ['read', 'write'],
        tokenEndpointAuthMethod: 'client_secret_post',
      });
      const { status, body } = await postForm(server, '/token', {
        grant_type: 'client_credentials',
        scope: 'write',
        client_id: 'token-svc-post',
        client_secret: postSecret,
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.scope).to.equal('write');
    });

    it('grants all registered scopes when none are asked for', async function () {
      const { body } = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials' },
        { Authorization: basic('token-svc', secret) },
      );
      expect(body.scope.split(' ').sort()).to.deep.equal(['read', 'write']);
    });

    it('never grants openid to a token without a user: not when no scope is asked for, not when openid is asked for (issue 23)', async function () {
      const oidcSecret = await confidentialClient(server, 'token-svc-oidc', { scopes: ['openid', 'profile', 'read'] });
      const ask = (form: Record<string, string>) =>
        postForm(
          server,
          '/token',
          { grant_type: 'client_credentials', ...form },
          { Authorization: basic('token-svc-oidc', oidcSecret) },
        );
      const everything = await ask({});
      expect(everything.status, JSON.stringify(everything.body)).to.equal(200);
      expect(everything.body.scope.split(' ').sort()).to.deep.equal(['profile', 'read']);
      const named = await ask({ scope: 'openid read' });
      expect(named.status, JSON.stringify(named.body)).to.equal(200);
      expect(named.body.scope).to.equal('read');
      const only = await ask({ scope: 'openid' });
      expect(only.status).to.equal(400);
      expect(only.body.error).to.equal('invalid_scope');
      const userinfo = await server.request('/userinfo', {
        headers: { Authorization: `Bearer ${everything.body.access_token}` },
      });
      expect(userinfo.status).to.equal(401);
    });

    it('narrows the requested scopes to what the policy allows', async function () {
      const { status, body } = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read admin' },
        { Authorization: basic('token-svc', secret) },
      );
      expect(status).to.equal(200);
      expect(body.scope).to.equal('read');
    });

    it('relays a policy denial as a 400 with the policy error', async function () {
      const { status, body, headers } = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'admin' },
        { Authorization: basic('token-svc', secret) },
      );
      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_scope');
      expect(body.error_description).to.be.a('string').and.not.empty;
      expect(headers.get('pragma')).to.equal('no-cache');
    });

    /** A private_key_jwt client `clientId` with a key of its own; `assertionFor(aud)` signs a fresh client assertion with it. */
    const keyClient = async (clientId: string) => {
      const { publicKey, privateKey } = await generateKeyPair('ES256');
      const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
      await server.admin('POST', '/clients', {
        clientId,
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'private_key_jwt',
        jwks: { keys: [jwk] },
        scopes: ['read'],
      });
      const assertionFor = (aud: string, times: { iat?: number; exp?: number } = {}) =>
        new SignJWT({})
          .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
          .setIssuer(clientId)
          .setSubject(clientId)
          .setAudience(aud)
          .setJti(randomUUID())
          .setIssuedAt(times.iat)
          .setExpirationTime(times.exp ?? '1m')
          .sign(privateKey);
      return {
        form: async (aud: string, times: { iat?: number; exp?: number } = {}) => ({
          grant_type: 'client_credentials',
          client_id: clientId,
          client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
          client_assertion: await assertionFor(aud, times),
        }),
      };
    };

    it('accepts private_key_jwt (RFC 7523)', async function () {
      const form = await (await keyClient('jwt-svc')).form(server.config.issuer);
      const first = await postForm(server, '/token', form);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.scope).to.equal('read');
      const replayed = await postForm(server, '/token', form);
      expect(replayed.status).to.equal(401);
      expect(replayed.body.error).to.equal('invalid_client');
    });

    // RFC 7523 §3. Found 2026-11-29: an assertion valid for 1,000 years, or issued a year ahead, was taken.
    it('refuses a client assertion whose exp is more than an hour ahead, or whose iat is in the future', async function () {
      const client = await keyClient('jwt-times-svc');
      const now = Math.floor(Date.now() / 1000);
      const token = async (times: { iat?: number; exp?: number }) =>
        postForm(server, '/token', await client.form(server.config.issuer, times));
      for (const times of [
        { exp: now + 3700 },
        { exp: now + 1000 * 365 * 86_400 },
        { iat: now + 3600, exp: now + 3660 },
      ]) {
        const refused = await token(times);
        expect(refused.status, JSON.stringify(times)).to.equal(401);
        expect(refused.body.error).to.equal('invalid_client');
      }
      expect((await token({ exp: now + 3000 })).status, 'within the hour').to.equal(200);
    });

    it("takes a client assertion made out to this server's token endpoint, never to a host the request's Host header names", async function () {
      const client = await keyClient('jwt-aud-svc');
      const withAudience = async (aud: string, host?: string) => {
        const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
        if (host) headers.host = host;
        const body = new URLSearchParams(await client.form(aud)).toString();
        return rawRequest(server.url, { method: 'POST', path: '/token', headers, body });
      };
      expect((await withAudience(`${server.config.issuer}/token`)).status, 'its token endpoint').to.equal(200);
      // Another server's assertion, replayed here with that server's name in Host (200 before).
      const replayed = await withAudience('http://other-as.example/token', 'other-as.example');
      expect(replayed.status, replayed.text).to.equal(401);
      expect(replayed.json()).to.include({ error: 'invalid_client' });
    });

    it('refuses public clients (client_credentials is for confidential clients)', async function () {
      await server.admin('POST', '/clients', {
        clientId: 'spa',
        clientType: 'public',
        redirectUris: ['https://spa.example.test/cb'],
      });
      const { status, body } = await postForm(server, '/token', { grant_type: 'client_credentials', client_id: 'spa' });
      expect(status).to.equal(400);
      expect(body.error).to.be.oneOf(['unauthorized_client', 'invalid_request']);
    });
  });

  describe('errors of the spec table', function () {
    it('answers 401 invalid_client for a wrong secret or an unknown client', async function () {
      for (const auth of [basic('token-svc', 'wrong'), basic('nobody', 'x')]) {
        const { status, body, headers } = await postForm(
          server,
          '/token',
          { grant_type: 'client_credentials' },
          { Authorization: auth },
        );
        expect(status).to.equal(401);
        expect(body.error).to.equal('invalid_client');
        expect(headers.get('cache-control')).to.equal('no-store');
      }
    });

    it('answers invalid_request when grant_type is absent, before any client authentication', async function () {
      const { status, body } = await postForm(server, '/token', { scope: 'read' });
      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_request');
      expect(body.error_description).to.contain('grant_type');
    });

    it('answers unsupported_grant_type for the password grant', async function () {
      const { status, body } = await postForm(
        server,
        '/token',
        { grant_type: 'password', username: 'u', password: 'p' },
        { Authorization: basic('token-svc', secret) },
      );
      expect(status).to.equal(400);
      expect(body.error).to.equal('unsupported_grant_type');
    });

    it('answers unsupported_grant_type for an unknown grant', async function () {
      const { status, body } = await postForm(
        server,
        '/token',
        { grant_type: 'urn:example:magic' },
        { Authorization: basic('token-svc', secret) },
      );
      expect(status).to.equal(400);
      expect(body.error).to.equal('unsupported_grant_type');
    });

    it('rejects a resource indicator with a fragment', async function () {
      const { status, body } = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', resource: 'https://api.example.test/#frag' },
        { Authorization: basic('token-svc', secret) },
      );
      expect(status).to.equal(400);
      expect(body.error).to.be.oneOf(['invalid_target', 'invalid_request']);
    });

    it('never answers a malformed body with a 500', async function () {
      const response = await server.request('/token', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{"grant_type":',
      });
      expect(response.status).to.equal(400);
    });
  });

  describe('tenants', function () {
    it("keeps a tenant's clients and tokens invisible to another tenant", async function () {
      const appSecret = await confidentialClient(server, 'tenant-app', { scopes: ['read'] }, 'tenant-a');
      const rsSecret = await confidentialClient(server, 'tenant-rs', { scopes: ['introspection'] }, 'tenant-b');
      const inA = { 'X-Tenant-Id': 'tenant-a' };
      const inB = { 'X-Tenant-Id': 'tenant-b' };

      const issued = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('tenant-app', appSecret), ...inA },
      );
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      const elsewhere = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('tenant-app', appSecret), ...inB },
      );
      expect(elsewhere.status).to.equal(401);
      expect(elsewhere.body.error).to.equal('invalid_client');
      const inDefault = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('tenant-app', appSecret) },
      );
      expect(inDefault.status).to.equal(401);

      const rsToken = (
        await postForm(
          server,
          '/token',
          { grant_type: 'client_credentials', scope: 'introspection' },
          { Authorization: basic('tenant-rs', rsSecret), ...inB },
        )
      ).body.access_token;
      const ownTenant = await postForm(
        server,
        '/introspect',
        { token: rsToken },
        { Authorization: `Bearer ${rsToken}`, ...inB },
      );
      expect(ownTenant.body.active, "the caller may introspect its own tenant's tokens").to.equal(true);
      const introspected = await postForm(
        server,
        '/introspect',
        { token: issued.body.access_token },
        { Authorization: `Bearer ${rsToken}`, ...inB },
      );
      expect(introspected.body).to.deep.equal({ active: false });
      const wrongTenantCaller = await postForm(
        server,
        '/introspect',
        { token: issued.body.access_token },
        { Authorization: `Bearer ${rsToken}`, ...inA },
      );
      expect(wrongTenantCaller.status, "tenant-b's token is unknown in tenant-a").to.equal(401);
    });

    it('refuses a malformed X-Tenant-Id with a 400', async function () {
      const { status, body } = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials' },
        { Authorization: basic('token-svc', secret), 'X-Tenant-Id': 'no spaces/allowed' },
      );
      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_request');
    });
  });

  describe('audit', function () {
    it('records the policy input and decision of a token request, without the secret', async function () {
      await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('token-svc', secret) },
      );
      const { body } = await server.admin('GET', '/audit-logs?endpoint=/token&clientId=token-svc&size=1');
      const [entry] = body.content;
      expect(entry.outcome).to.equal('allow');
      expect(entry.policyInput.request.grant_type).to.equal('client_credentials');
      expect(entry.policyDecision.allow).to.equal(true);
      expect(entry.policyDecision.engines).to.deep.include({ rego: 'allow', cedar: 'none' });
      expect(JSON.stringify(entry)).not.to.contain(secret);
    });

    it('resolves the resource indicator to a resource type for the policy, else takes the resource_type hint', async function () {
      await server.admin('POST', '/resource-servers', {
        resourceIndicator: 'https://ledger.example.test/',
        typeUris: ['urn:example:ledger'],
      });
      const lastInput = async () =>
        (await server.admin('GET', '/audit-logs?endpoint=/token&clientId=token-svc&size=1&sort=id,desc')).body
          .content[0].policyInput.request;

      await postForm(
        server,
        '/token',
        {
          grant_type: 'client_credentials',
          scope: 'read',
          resource: 'https://ledger.example.test/',
          resource_types: 'urn:a,urn:b',
        },
        { Authorization: basic('token-svc', secret) },
      );
      const registered = await lastInput();
      expect(registered).to.include({
        resource: 'https://ledger.example.test/',
        resolved_resource_type: 'urn:example:ledger',
      });
      expect(registered.resource_types).to.deep.equal(['urn:a', 'urn:b']);

      await postForm(
        server,
        '/token',
        {
          grant_type: 'client_credentials',
          scope: 'read',
          resource: 'https://unknown.example.test/',
          resource_type: 'urn:example:hinted',
        },
        { Authorization: basic('token-svc', secret) },
      );
      expect(await lastInput()).to.include({
        resource: 'https://unknown.example.test/',
        resolved_resource_type: 'urn:example:hinted',
      });
    });
  });
});
