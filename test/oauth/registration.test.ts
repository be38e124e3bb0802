import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type JWK } from 'jose';
import * as client from 'openid-client';
import { storageDigest } from '../../src/store/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { clientCredentials, eventually, postForm, updateOauthData } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { StatementIssuer } from '../support/statement-issuer.js';

const REDIRECT_URI = 'http://127.0.0.1:1/dcr/callback';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const STATEMENT_ISSUER = 'https://statements.example.test';
const DENIED_SOFTWARE = '0d6c3f5e-2b1a-4c8d-9e7f-112233445566';
type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
const insecure = { execute: [client.allowInsecureRequests] };

type Answer = { status: number; body: any; headers: Headers };

async function registerAt(server: TestServer, body: unknown, raw?: string): Promise<Answer> {
  const response = await server.request('/register', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: raw ?? JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

async function manage(
  server: TestServer,
  method: string,
  clientId: string,
  token: string | undefined,
  json?: unknown,
): Promise<Answer> {
  const headers: Record<string, string> = token === undefined ? {} : { Authorization: `Bearer ${token}` };
  const response = await server.request(`/register/${encodeURIComponent(clientId)}`, { method, headers, json });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/**
 * POST /register (RFC 7591) and /register/{client_id} (RFC 7592), answered by Arbiter itself:
 * validated, decided by the `register` policy, stored in the client collection the Admin API
 * and /token use.
 */
describe('dynamic client registration', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  const metadata = {
    redirect_uris: ['https://app.example.test/cb'],
    client_name: 'App',
    token_endpoint_auth_method: 'none',
  };
  const register = (body: unknown, raw?: string) => registerAt(server, body, raw);
  const stored = (clientId: string) =>
    server.store.collection('clients', '_default').findOne({ clientId }) as Promise<any>;

  before(async function () {
    // Its own server: the tests open registration in the shared policy data.
    server = await readyServer();
    idp = await startRegisteredDevIdp(server);
  });
  after(async function () {
    await idp?.close();
    await server?.close();
  });

  describe('while public_client_policy.enabled is false (the default)', function () {
    it('refuses plain registration, and audits the denial', async function () {
      const { status, body } = await register(metadata);
      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_client_metadata');
      expect(body.error_description).to.match(/open registration is disabled/);
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/register&size=1&sort=id,desc')).body.content;
      expect(entry.outcome).to.equal('deny');
      expect(entry.policyInput.registration).to.deep.include({
        client_type: 'public',
        token_endpoint_auth_method: 'none',
        software_statement: null,
      });
    });

    it('reads at most 64 KiB of a registration request before anyone is authenticated (413)', async function () {
      const padded = (bytes: number) => JSON.stringify({ ...metadata, client_name: 'x'.repeat(bytes) });
      const large = await register(undefined, padded(64 * 1024));
      expect(large.status).to.equal(413);
      expect(large.body).to.include({
        error: 'invalid_request',
        error_description: 'the request body exceeds 65536 bytes',
      });
      expect((await register(undefined, padded(60 * 1024))).status, 'below the bound: decided as usual').to.equal(400);
    });

    it('answers malformed bodies and statements with a clear 400', async function () {
      expect((await register(undefined, '{"redirect_uris":')).status).to.equal(400);
      const notObject = await register(['https://app.example.test/cb']);
      expect(notObject.status).to.equal(400);
      expect(notObject.body.error).to.equal('invalid_client_metadata');
      const notJwt = await register({ ...metadata, software_statement: 'not-a-jwt' });
      expect(notJwt.status).to.equal(400);
      expect(notJwt.body.error).to.equal('invalid_software_statement');
    });

    it('refuses a software statement from an issuer policy data does not trust, without logging it', async function () {
      const statement = new UnsecuredJWT({ software_id: '4b1c8f2e-8a34-4d8e-9b1f-0c2d3e4f5a6b' })
        .setIssuer('https://untrusted.example.test')
        .setIssuedAt()
        .encode();
      const { status, body } = await register({ ...metadata, software_statement: statement });
      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_software_statement');
      expect(
        JSON.stringify((await server.admin('GET', '/audit-logs?endpoint=/register&size=1&sort=id,desc')).body),
        'the statement is never logged',
      ).not.to.contain(statement);
    });

    it('never hands /register or /register/* to oidc-provider', async function () {
      expect((await server.request('/register')).status).to.equal(405);
      expect((await manage(server, 'GET', 'anything', 'token')).status).to.equal(401);
    });
  });

  describe('with software statements', function () {
    let issuer: StatementIssuer;
    before(async function () {
      issuer = await StatementIssuer.start();
      await updateOauthData(server, (data) => {
        data.trusted_issuers = { [issuer.url]: { jwks_uri: `${issuer.url}/jwks`, uses: ['software_statement'] } };
        data.software_statements = { denylist: [DENIED_SOFTWARE] };
      });
    });
    after(async function () {
      await issuer?.close();
    });

    // Signed: a trusted issuer's statements are always verified (test/security/forged-statements.test.ts).
    const statementOf = (claims: Record<string, unknown>) => issuer.sign(claims);

    it('registers a client with the entitlements the policy grants; they are stored and used at /token', async function () {
      const softwareId = '8f14e45f-ceea-467f-a0e6-5b2a1c3d4e5f';
      const statement = await statementOf({
        software_id: softwareId,
        software_version: '2.1',
        grant_types: ['client_credentials'],
        granted_resources: [{ type: 'urn:as:introspect', scopes: ['uma_protection', 'root'] }],
      });
      const { status, body } = await register({
        redirect_uris: ['https://rs.example.test/cb'],
        grant_types: ['client_credentials'],
        software_statement: statement,
      });
      expect(status, JSON.stringify(body)).to.equal(201);
      expect(body).to.include({
        software_id: softwareId,
        software_version: '2.1',
        software_statement: statement,
        token_endpoint_auth_method: 'client_secret_basic',
        scope: 'uma_protection',
      });
      expect(body.grant_types).to.deep.equal(['client_credentials']);
      expect(body.response_types).to.deep.equal([]);
      const record = await stored(body.client_id);
      expect(record.grantedResources).to.deep.equal([{ type: 'urn:as:introspect', scopes: ['uma_protection'] }]);

      // Later decisions see the stored entitlements: a protection token for the client.
      const token = await clientCredentials(server, body.client_id, body.client_secret, {
        scope: 'uma_protection',
        resource: 'urn:as:introspect',
      });
      expect(token.status, JSON.stringify(token.body)).to.equal(200);
      expect(token.body.scope).to.equal('uma_protection');
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect(entry.policyInput.client).to.deep.include({
        registration_type: 'dcr',
        granted_resources: [{ type: 'urn:as:introspect', scopes: ['uma_protection'] }],
      });
    });

    // Found 2026-11-29: any JWT of a trusted issuer (a user's ID token) passed as a statement.
    it('refuses a JWT of the issuer that names no software as invalid_software_statement', async function () {
      const idTokenLike = await statementOf({ sub: 'alice', aud: 'some-client', nonce: 'n-1' });
      const { status, body } = await register({ ...metadata, software_statement: idTokenLike });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body).to.include({ error: 'invalid_software_statement' });
      expect(body.error_description).to.contain('names no software');
    });

    // RFC 7591 §2.3; found 2026-11-29: the request's software_id was stored over the signed one.
    it("registers the statement's software_id and software_version over the request's", async function () {
      const signed = '1b2c3d4e-5f60-4718-9a0b-1c2d3e4f5a6b';
      const { status, body } = await register({
        ...metadata,
        software_id: '22222222-2222-4222-8222-222222222222',
        software_version: '9.9',
        software_statement: await statementOf({ software_id: signed, software_version: '1.0' }),
      });
      expect(status, JSON.stringify(body)).to.equal(201);
      expect(body).to.include({ software_id: signed, software_version: '1.0' });
      expect(await stored(body.client_id)).to.include({ softwareId: signed });
    });

    it('updates (RFC 7592) a client whose statement, stored by an earlier release, names no software', async function () {
      const made = await register({
        ...metadata,
        software_statement: await statementOf({ software_id: '3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f' }),
      });
      expect(made.status, JSON.stringify(made.body)).to.equal(201);
      const clients = server.store.collection('clients', '_default');
      const record = (await clients.findOne({ clientId: made.body.client_id }))!;
      await clients.upsert({ ...record, softwareStatementJwt: await statementOf({ client_name: 'Older' }) });
      const older = await manage(server, 'GET', made.body.client_id, made.body.registration_access_token);
      const updated = await manage(server, 'PUT', made.body.client_id, made.body.registration_access_token, {
        ...metadata,
        client_id: made.body.client_id,
        client_name: 'Updated',
      });
      expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
      // RFC 7592 §2.2: an update sends back every field the read answered, the stored statement too.
      const echoed = await manage(server, 'PUT', made.body.client_id, updated.body.registration_access_token, {
        ...metadata,
        client_id: made.body.client_id,
        software_statement: older.body.software_statement,
      });
      expect(echoed.status, JSON.stringify(echoed.body)).to.equal(200);
    });

    it('refuses a denylisted software_id as unapproved_software_statement', async function () {
      // In any letter case (found 2026-11-30: in capitals it was registered, and stored in small letters).
      for (const softwareId of [DENIED_SOFTWARE, DENIED_SOFTWARE.toUpperCase()]) {
        const { status, body } = await register({
          ...metadata,
          software_statement: await statementOf({ software_id: softwareId }),
        });
        expect(status, softwareId).to.equal(400);
        expect(body.error).to.equal('unapproved_software_statement');
      }
    });

    it('refuses garbage as invalid_software_statement', async function () {
      for (const garbage of ['a.b.c', 'eyJhbGciOiJub25lIn0.bm90IGpzb24.', 42, { iss: STATEMENT_ISSUER }]) {
        const { status, body } = await register({ ...metadata, software_statement: garbage });
        expect(status, String(garbage)).to.equal(400);
        expect(body.error).to.equal('invalid_software_statement');
      }
    });
  });

  describe('plain registration, once policy data opens it', function () {
    before(async function () {
      await updateOauthData(server, (data) => {
        data.public_client_policy.enabled = true;
        data.public_client_policy.dcr.allowed_grant_types = [
          'authorization_code',
          'refresh_token',
          'client_credentials',
        ];
      });
      await eventually(async () => (await register(metadata)).status === 201);
    });

    it('answers each validation error with its code and the field', async function () {
      const cases: [Record<string, unknown>, string, RegExp][] = [
        [{ client_name: 'x' }, 'invalid_redirect_uri', /redirect_uris is required/],
        [{ redirect_uris: [] }, 'invalid_redirect_uri', /redirect_uris/],
        [{ redirect_uris: ['/relative'] }, 'invalid_redirect_uri', /absolute/],
        [{ redirect_uris: ['https://app.example.test/cb#frag'] }, 'invalid_redirect_uri', /fragment/],
        [{ redirect_uris: 'https://app.example.test/cb' }, 'invalid_redirect_uri', /redirect_uris/],
        [
          { ...metadata, token_endpoint_auth_method: 'client_secret_jwt' },
          'invalid_client_metadata',
          /token_endpoint_auth_method/,
        ],
        [
          { ...metadata, token_endpoint_auth_method: 'private_key_jwt' },
          'invalid_client_metadata',
          /private_key_jwt needs jwks or jwks_uri/,
        ],
        [{ ...metadata, grant_types: ['implicit'] }, 'invalid_client_metadata', /grant_types/],
        [{ ...metadata, grant_types: ['client_credentials'] }, 'invalid_client_metadata', /grant_types/],
        [{ ...metadata, response_types: ['token'] }, 'invalid_client_metadata', /response_types/],
        [
          { ...metadata, jwks_uri: 'http://keys.example.test/jwks' },
          'invalid_client_metadata',
          /jwks_uri must be an https URI/,
        ],
        [{ ...metadata, contacts: ['not-an-email'] }, 'invalid_client_metadata', /contacts/],
        [{ ...metadata, software_id: 'not-a-uuid' }, 'invalid_client_metadata', /software_id must be a UUID/],
        [{ ...metadata, client_uri: 'javascript:alert(1)' }, 'invalid_client_metadata', /client_uri/],
        [{ ...metadata, jwks: { keys: [{ kty: 'oct', k: 'c2VjcmV0' }] } }, 'invalid_client_metadata', /jwks/],
        [{ ...metadata, scope: 7 }, 'invalid_client_metadata', /scope/],
        // RFC 8705's members on a server without mutual TLS: no certificate is ever seen here.
        [
          { ...metadata, tls_client_auth_subject_dn: 'CN=client' },
          'invalid_client_metadata',
          /tls_client_auth_subject_dn needs mutual TLS/,
        ],
        [
          { ...metadata, tls_client_certificate_bound_access_tokens: true },
          'invalid_client_metadata',
          /tls_client_certificate_bound_access_tokens needs mutual TLS/,
        ],
      ];
      for (const [body, error, description] of cases) {
        const answer = await register(body);
        expect(answer.status, JSON.stringify(body)).to.equal(400);
        expect(answer.body.error, JSON.stringify(body)).to.equal(error);
        expect(answer.body.error_description, JSON.stringify(body)).to.match(description);
      }
      const { privateKey } = await generateKeyPair('ES256', { extractable: true });
      const privateJwk = await exportJWK(privateKey);
      const withPrivate = await register({
        ...metadata,
        token_endpoint_auth_method: 'private_key_jwt',
        jwks: { keys: [privateJwk] },
      });
      expect(withPrivate.body).to.deep.include({ error: 'invalid_client_metadata' });
      expect(withPrivate.body.error_description).to.match(/public keys only/);
    });

    it('refuses what the catalog schema refuses, so that every registered client is one the Admin API can replace', async function () {
      // The URL parser reads HTTPS: as https:, the catalog's schema (the Admin API's) takes only a lower-case scheme:
      // stored, it would be a client that no Admin PUT of what GET shows could write back.
      const answer = await register({ ...metadata, client_uri: 'HTTPS://app.example.test/' });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
      expect(answer.body).to.deep.include({ error: 'invalid_client_metadata' });
      expect(answer.body.error_description).to.match(/^client_uri must match pattern/);
    });

    it('fills in the defaults, generates a UUID and a 43-character secret kept only as its keyed digest', async function () {
      const softwareId = '3f2b9c1a-7d4e-4f5a-8b6c-9d0e1f2a3b4c';
      const { status, body } = await register({
        redirect_uris: ['https://app.example.test/cb'],
        client_name: 'Confidential',
        scope: 'openid profile',
        contacts: ['ops@example.test'],
        tos_uri: 'https://app.example.test/tos',
        software_id: softwareId,
        software_version: '1.0.3',
        unknown_field: 'ignored',
      });
      expect(status, JSON.stringify(body)).to.equal(201);
      expect(body.client_id).to.match(UUID);
      expect(body.client_secret).to.be.a('string').with.lengthOf(43);
      expect(body.client_secret_expires_at).to.equal(0);
      expect(body.client_id_issued_at)
        .to.be.a('number')
        .within(Date.now() / 1000 - 60, Date.now() / 1000 + 1);
      expect(body).to.deep.include({
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: ['https://app.example.test/cb'],
        client_name: 'Confidential',
        contacts: ['ops@example.test'],
        tos_uri: 'https://app.example.test/tos',
        software_id: softwareId,
        software_version: '1.0.3',
        scope: 'openid profile',
        registration_client_uri: `${server.config.issuer}/register/${body.client_id}`,
      });
      expect(body).not.to.have.property('unknown_field');
      expect(body.registration_access_token).to.be.a('string');

      const record = await stored(body.client_id);
      expect(record).to.include({
        registrationType: 'dcr',
        clientType: 'confidential',
        tenantId: null,
        registrationAccessTokenDigest: storageDigest(body.registration_access_token),
      });
      // Generated (256 bits): kept as its keyed digest, not BCrypt (src/oauth/clients/secrets.ts).
      expect(record.clientSecret).to.match(/^hmac-sha256:[\w-]{43}$/);
      expect(JSON.stringify(record))
        .not.to.contain(body.client_secret)
        .and.not.to.contain(body.registration_access_token);
    });

    it('a confidential client gets tokens with its secret at once, and the Admin API lists it', async function () {
      const { body } = await register({
        redirect_uris: ['https://app.example.test/cb'],
        grant_types: ['client_credentials'],
        token_endpoint_auth_method: 'client_secret_post',
        scope: 'profile',
      });
      expect(body.client_secret).to.have.lengthOf(43);
      const token = await postForm(server, '/token', {
        grant_type: 'client_credentials',
        client_id: body.client_id,
        client_secret: body.client_secret,
      });
      expect(token.status, JSON.stringify(token.body)).to.equal(200);
      expect(token.body.access_token).to.be.a('string');
      const wrong = await postForm(server, '/token', {
        grant_type: 'client_credentials',
        client_id: body.client_id,
        client_secret: 'x'.repeat(32),
      });
      expect(wrong.status).to.equal(401);

      const listed = await server.admin('GET', `/clients/${body.client_id}`);
      expect(listed.status).to.equal(200);
      expect(listed.body).to.include({
        clientId: body.client_id,
        registrationType: 'dcr',
        tokenEndpointAuthMethod: 'client_secret_post',
      });
      expect(listed.body).not.to.have.property('clientSecret');
      expect(listed.body).not.to.have.property('registrationAccessTokenDigest');
      // An Admin PUT of such a record (with its hash) still validates.
      const { id, createdAt, updatedAt, ...fields } = listed.body;
      const record = await stored(body.client_id);
      const put = await server.admin('PUT', `/clients/${body.client_id}`, {
        ...fields,
        clientSecret: record.clientSecret,
        clientName: 'Renamed',
      });
      expect(put.status, JSON.stringify(put.body)).to.equal(200);
      expect(
        (
          await postForm(server, '/token', {
            grant_type: 'client_credentials',
            client_id: body.client_id,
            client_secret: body.client_secret,
          })
        ).status,
      ).to.equal(200);
      // One that leaves the secret and the registration access token's digest out keeps both.
      expect(
        (await server.admin('PUT', `/clients/${body.client_id}`, { ...fields, clientName: 'Renamed again' })).status,
      ).to.equal(200);
      expect(
        (
          await postForm(server, '/token', {
            grant_type: 'client_credentials',
            client_id: body.client_id,
            client_secret: body.client_secret,
          })
        ).status,
      ).to.equal(200);
      const read = await manage(server, 'GET', body.client_id, body.registration_access_token);
      expect(read.status, JSON.stringify(read.body)).to.equal(200);
      expect(read.body.client_name).to.equal('Renamed again');
    });

    it('a private_key_jwt client authenticates with its key', async function () {
      const { publicKey, privateKey } = await generateKeyPair('ES256');
      const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'dcr-key', alg: 'ES256', use: 'sig' };
      const { status, body } = await register({
        redirect_uris: ['https://app.example.test/cb'],
        grant_types: ['client_credentials'],
        token_endpoint_auth_method: 'private_key_jwt',
        jwks: { keys: [jwk] },
      });
      expect(status, JSON.stringify(body)).to.equal(201);
      expect(body).not.to.have.property('client_secret');
      expect(body.jwks).to.deep.equal({ keys: [jwk] });
      const viaJwt = await client.discovery(
        new URL(server.config.issuer),
        body.client_id,
        undefined,
        client.PrivateKeyJwt({ key: privateKey, kid: 'dcr-key' }),
        insecure,
      );
      expect((await client.clientCredentialsGrant(viaJwt)).access_token).to.be.a('string');
      const { privateKey: otherKey } = await generateKeyPair('ES256');
      const impostor = await client.discovery(
        new URL(server.config.issuer),
        body.client_id,
        undefined,
        client.PrivateKeyJwt({ key: otherKey, kid: 'dcr-key' }),
        insecure,
      );
      await client.clientCredentialsGrant(impostor).then(
        () => expect.fail('an assertion signed by another key was accepted'),
        (error) => expect((error as client.ResponseBodyError).error).to.equal('invalid_client'),
      );
    });

    it('a public client signs in through the development IdP with PKCE', async function () {
      const { status, body } = await register({
        redirect_uris: [REDIRECT_URI],
        token_endpoint_auth_method: 'none',
        scope: 'openid profile email',
      });
      expect(status, JSON.stringify(body)).to.equal(201);
      expect(body).not.to.have.property('client_secret');
      const spa = { clientId: body.client_id as string, redirectUri: REDIRECT_URI };
      const request = await authorizationRequest(server, spa);
      const agent = new FetchUserAgent();
      const loginPage = await agent.navigate(request.url, arrivingAt(REDIRECT_URI));
      const arrived = await passDevIdpForms(agent, loginPage, 'alice', arrivingAt(REDIRECT_URI));
      const code = arrived.url.searchParams.get('code');
      expect(code, arrived.url.href).to.be.a('string');
      const tokens = await redeemCode(server, spa, code!, request.codeVerifier);
      expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
      expect(tokens.body.id_token).to.be.a('string');
      expect(tokens.body.scope.split(' ')).to.include('openid');
    });

    it('refuses grants outside public_client_policy.dcr.allowed_grant_types', async function () {
      await updateOauthData(server, (data) => {
        data.public_client_policy.dcr.allowed_grant_types = ['authorization_code', 'refresh_token'];
      });
      const disallowed = await register({
        redirect_uris: ['https://app.example.test/cb'],
        grant_types: ['client_credentials'],
      });
      expect(disallowed.status).to.equal(400);
      expect(disallowed.body.error).to.equal('invalid_client_metadata');
      expect(disallowed.body.error_description).to.match(/grant types not allowed: client_credentials/);
      await updateOauthData(server, (data) => {
        data.public_client_policy.dcr.allowed_grant_types = [
          'authorization_code',
          'refresh_token',
          'client_credentials',
        ];
      });
    });

    describe('RFC 7592 management at the registration client URI', function () {
      let registered: any;
      let other: any;
      beforeEach(async function () {
        registered = (
          await register({
            redirect_uris: ['https://app.example.test/cb'],
            grant_types: ['client_credentials'],
            client_name: 'Managed',
          })
        ).body;
        other = (await register({ ...metadata, client_name: 'Other' })).body;
      });

      const tokenFor = (clientId: string, secret: string) => clientCredentials(server, clientId, secret);

      /**
       * PUT /register/{id} with `body`, all but its last byte sent at once: `meanwhile` runs while the
       * server waits for the rest (its sender chooses how long), then the last byte goes.
       */
      async function heldUpdate(body: unknown, meanwhile: () => Promise<void>): Promise<{ status: number; body: any }> {
        const text = JSON.stringify(body);
        const url = new URL(`${server.url}/register/${encodeURIComponent(registered.client_id)}`);
        const socket = connect(Number(url.port), url.hostname);
        await once(socket, 'connect');
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk));
        const ended = once(socket, 'close');
        socket.write(
          `PUT ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n` +
            `Authorization: Bearer ${registered.registration_access_token}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text.slice(0, -1)}`,
        );
        await meanwhile();
        socket.write(text.slice(-1));
        await ended;
        const [head, ...rest] = answer.split('\r\n\r\n');
        const json = rest.join('\r\n\r\n');
        return {
          status: Number(head!.split(' ')[1]),
          body: JSON.parse(json.slice(json.indexOf('{'), json.lastIndexOf('}') + 1)),
        };
      }

      it("never undoes what an operator did while an update's body was on its way: a disable, a secret rotation (found 2026-11-30)", async function () {
        const update = {
          client_id: registered.client_id,
          redirect_uris: ['https://app.example.test/cb'],
          grant_types: ['client_credentials'],
          client_name: 'Managed again',
        };
        let rotated = '';
        const afterRotation = await heldUpdate(update, async () => {
          const answer = await server.admin('POST', `/clients/${encodeURIComponent(registered.client_id)}/secret`);
          expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
          rotated = answer.body.generatedClientSecret;
        });
        expect(afterRotation.status, JSON.stringify(afterRotation.body)).to.equal(200);
        // Was: the secret read before the rotation written back, and the operator's new one gone.
        expect(
          (await tokenFor(registered.client_id, registered.client_secret)).status,
          'the secret rotated away',
        ).to.equal(401);
        expect((await tokenFor(registered.client_id, rotated)).status, 'the rotated secret').to.equal(200);

        registered.registration_access_token = afterRotation.body.registration_access_token;
        const afterDisable = await heldUpdate({ ...update, client_name: 'Enabled again?' }, async () => {
          const path = `/clients/${encodeURIComponent(registered.client_id)}`;
          const {
            id: _id,
            createdAt: _created,
            updatedAt: _updated,
            ...fields
          } = (await server.admin('GET', path)).body;
          const disabled = await server.admin('PUT', path, { ...fields, enabled: false });
          expect(disabled.status, JSON.stringify(disabled.body)).to.equal(200);
        });
        // Was: 200, and the client enabled again by its own request.
        expect(afterDisable.status, JSON.stringify(afterDisable.body)).to.equal(403);
        expect(afterDisable.body.error).to.equal('access_denied');
        const shown = (await server.admin('GET', `/clients/${encodeURIComponent(registered.client_id)}`)).body;
        expect(shown).to.include({ enabled: false, clientName: 'Managed again' });
        // And the token it came with is still its own: a disabled client may read its registration.
        const read = await manage(server, 'GET', registered.client_id, registered.registration_access_token);
        expect(read.status, JSON.stringify(read.body)).to.equal(200);
      });

      it('reads the registration with its token (RFC 7592 §3: registration_access_token included, not rotated), and no secret', async function () {
        for (let read = 0; read < 2; read++) {
          const { status, body, headers } = await manage(
            server,
            'GET',
            registered.client_id,
            registered.registration_access_token,
          );
          expect(status).to.equal(200);
          expect(body).to.include({
            client_id: registered.client_id,
            client_name: 'Managed',
            registration_client_uri: registered.registration_client_uri,
            registration_access_token: registered.registration_access_token,
            client_secret_expires_at: 0,
          });
          expect(body).not.to.have.property('client_secret');
          expect(headers.get('cache-control')).to.equal('no-store');
        }
        const stored = (await server.admin('GET', `/clients/${registered.client_id}`)).body;
        expect(JSON.stringify(stored)).not.to.contain(registered.registration_access_token);
      });

      it('records neither the registration access token of a read answer sent back in an update nor members registration does not read', async function () {
        const { client_id: clientId, registration_access_token: token } = registered;
        const read = await manage(server, 'GET', clientId, token);
        // Sent back whole (a common read-modify-write), with a member nobody reads; the policy refuses the grant.
        const update = {
          ...read.body,
          grant_types: ['urn:ietf:params:oauth:grant-type:device_code'],
          junk: 'j'.repeat(20_000),
        };
        const refused = await manage(server, 'PUT', clientId, token, update);
        expect(refused.status).to.equal(400);
        expect((await manage(server, 'GET', clientId, token)).status, 'a refused update keeps the token').to.equal(200);
        const entries = (await server.admin('GET', `/audit-logs?endpoint=/register/${clientId}&size=50`)).body.content;
        expect(entries.filter((entry: any) => entry.policyInput)).to.have.length.above(0);
        for (const entry of entries) {
          expect(JSON.stringify(entry), 'the live registration access token').not.to.contain(token);
          expect(JSON.stringify(entry), 'a member registration does not read').not.to.contain('jjjjjjjj');
        }
      });

      it('rotates the registration access token on update: the answer carries a new one, the old one stops working, a refused update keeps it', async function () {
        const { registration_access_token: old, client_id: clientId } = registered;
        const update = {
          client_id: clientId,
          redirect_uris: ['https://app.example.test/cb'],
          grant_types: ['client_credentials'],
          client_name: 'Rotated',
        };
        const refused = await manage(server, 'PUT', clientId, old, { ...update, redirect_uris: ['http://x.example/'] });
        expect(refused.status).to.equal(400);
        expect((await manage(server, 'GET', clientId, old)).status, 'a refused update rotates nothing').to.equal(200);
        const updated = await manage(server, 'PUT', clientId, old, update);
        expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
        const rotated = updated.body.registration_access_token;
        expect(rotated).to.be.a('string').with.length.above(40).and.not.equal(old);
        for (const method of ['GET', 'PUT', 'DELETE']) {
          const answer = await manage(server, method, clientId, old, method === 'PUT' ? update : undefined);
          expect(answer.status, `${method} with the old token`).to.equal(401);
          expect(answer.body.error).to.equal('invalid_token');
        }
        const read = await manage(server, 'GET', clientId, rotated);
        expect(read.status).to.equal(200);
        expect(read.body).to.include({ client_name: 'Rotated', registration_access_token: rotated });
      });

      it('refuses an update that chooses another client_secret (RFC 7592 §2.2), and takes the current one back as it is', async function () {
        const { registration_access_token: token, client_id: clientId, client_secret: secret } = registered;
        const update = {
          client_id: clientId,
          redirect_uris: ['https://app.example.test/cb'],
          grant_types: ['client_credentials'],
        };
        const chosen = await manage(server, 'PUT', clientId, token, {
          ...update,
          client_secret: 'one-the-client-chose-itself',
        });
        expect([chosen.status, chosen.body.error], JSON.stringify(chosen.body)).to.deep.equal([
          400,
          'invalid_client_metadata',
        ]);
        expect(chosen.body.error_description).to.match(/client_secret/);
        expect((await tokenFor(clientId, secret)).status, 'the secret is unchanged').to.equal(200);
        const same = await manage(server, 'PUT', clientId, token, { ...update, client_secret: secret });
        expect(same.status, JSON.stringify(same.body)).to.equal(200);
        expect((await tokenFor(clientId, secret)).status).to.equal(200);
      });

      it('lets one of two concurrent updates with the same token win; the other is 401 invalid_token', async function () {
        const { registration_access_token: token, client_id: clientId } = registered;
        const update = (name: string) =>
          manage(server, 'PUT', clientId, token, {
            client_id: clientId,
            redirect_uris: ['https://app.example.test/cb'],
            grant_types: ['client_credentials'],
            client_name: name,
          });
        const answers = await Promise.all([update('First'), update('Second')]);
        expect(answers.map((answer) => answer.status).sort()).to.deep.equal([200, 401]);
        const winner = answers.find((answer) => answer.status === 200)!;
        const read = await manage(server, 'GET', clientId, winner.body.registration_access_token);
        expect(read.status).to.equal(200);
        expect(read.body.client_name).to.equal(winner.body.client_name);
      });

      it('refuses a missing or wrong token, and another client’s token, with 401 invalid_token', async function () {
        for (const [clientId, token] of [
          [registered.client_id, undefined],
          [registered.client_id, 'wrong-token'],
          [registered.client_id, other.registration_access_token],
          [other.client_id, registered.registration_access_token],
          ['6a0c1e7d-0000-4000-8000-000000000000', registered.registration_access_token],
        ] as [string, string | undefined][]) {
          for (const method of ['GET', 'DELETE']) {
            const answer = await manage(server, method, clientId, token);
            expect(answer.status, `${method} ${clientId}`).to.equal(401);
            expect(answer.body.error).to.equal('invalid_token');
            expect(answer.headers.get('www-authenticate')).to.match(/^Bearer/);
          }
        }
        expect(
          (await manage(server, 'GET', registered.client_id, registered.registration_access_token)).status,
        ).to.equal(200);
      });

      it('updates a registration, re-validated and re-decided, keeping the secret while the method stays', async function () {
        const { registration_access_token: token, client_secret: secret, client_id: clientId } = registered;
        const renamed = await manage(server, 'PUT', clientId, token, {
          client_id: clientId,
          redirect_uris: ['https://app.example.test/cb2'],
          grant_types: ['client_credentials'],
          client_name: 'Renamed',
        });
        expect(renamed.status, JSON.stringify(renamed.body)).to.equal(200);
        expect(renamed.body).to.include({ client_name: 'Renamed' });
        expect(renamed.body.redirect_uris).to.deep.equal(['https://app.example.test/cb2']);
        expect(renamed.body).not.to.have.property('client_secret');
        expect((await tokenFor(clientId, secret)).status).to.equal(200);
        const rotated = renamed.body.registration_access_token;

        const invalid = await manage(server, 'PUT', clientId, rotated, {
          client_id: clientId,
          redirect_uris: ['https://app.example.test/cb#x'],
        });
        expect(invalid.status).to.equal(400);
        expect(invalid.body.error).to.equal('invalid_redirect_uri');
        const otherId = await manage(server, 'PUT', clientId, rotated, {
          client_id: other.client_id,
          redirect_uris: ['https://app.example.test/cb'],
        });
        expect(otherId.status).to.equal(400);

        // A new confidential method issues a new secret; the old one stops working.
        const switched = await manage(server, 'PUT', clientId, rotated, {
          client_id: clientId,
          redirect_uris: ['https://app.example.test/cb'],
          grant_types: ['client_credentials'],
          token_endpoint_auth_method: 'client_secret_post',
        });
        expect(switched.status).to.equal(200);
        expect(switched.body.client_secret).to.have.lengthOf(43);
        expect(
          (
            await postForm(server, '/token', {
              grant_type: 'client_credentials',
              client_id: clientId,
              client_secret: switched.body.client_secret,
            })
          ).status,
        ).to.equal(200);
        expect(
          (
            await postForm(server, '/token', {
              grant_type: 'client_credentials',
              client_id: clientId,
              client_secret: secret,
            })
          ).status,
        ).to.equal(401);
      });

      it('drops on update every registered member the update leaves out (RFC 7592 §2.2), introspection_signed_response_alg too', async function () {
        const signed = await register({
          redirect_uris: ['https://app.example.test/cb'],
          grant_types: ['client_credentials'],
          introspection_signed_response_alg: 'RS256',
          client_uri: 'https://app.example.test',
        });
        expect(signed.status, JSON.stringify(signed.body)).to.equal(201);
        expect(signed.body).to.include({ introspection_signed_response_alg: 'RS256' });
        const { registration_access_token: token, client_id: clientId } = signed.body;
        const updated = await manage(server, 'PUT', clientId, token, {
          client_id: clientId,
          redirect_uris: ['https://app.example.test/cb'],
          grant_types: ['client_credentials'],
        });
        expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
        expect(updated.body).not.to.have.property('introspection_signed_response_alg');
        expect(updated.body).not.to.have.property('client_uri');
        const read = await manage(server, 'GET', clientId, updated.body.registration_access_token);
        expect(read.body).not.to.have.property('introspection_signed_response_alg');
      });

      it('re-asks the policy on update, which needs no open registration (the client is registered)', async function () {
        await updateOauthData(server, (data) => {
          data.public_client_policy.enabled = false;
        });
        try {
          const refused = await manage(server, 'PUT', other.client_id, other.registration_access_token, {
            client_id: other.client_id,
            ...metadata,
            grant_types: ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'],
          });
          expect(refused.status).to.equal(400);
          expect(refused.body.error).to.equal('invalid_client_metadata');
          expect(refused.body.error_description).to.equal(
            'grant types not allowed: urn:ietf:params:oauth:grant-type:device_code',
          );
          const kept = await manage(server, 'PUT', other.client_id, other.registration_access_token, {
            client_id: other.client_id,
            ...metadata,
          });
          expect(kept.status, JSON.stringify(kept.body)).to.equal(200);
          other.registration_access_token = kept.body.registration_access_token;
        } finally {
          await updateOauthData(server, (data) => {
            data.public_client_policy.enabled = true;
          });
        }
      });

      it('never widens on update what an operator narrowed: scopes and grant types stay within the client as it stands', async function () {
        const asked = { ...metadata, scope: 'openid email', grant_types: ['authorization_code', 'refresh_token'] };
        const made = (await register({ ...asked, client_name: 'Narrowed' })).body;
        expect(made.scope).to.equal('email openid');
        const fields = (await server.admin('GET', `/clients/${made.client_id}`)).body;
        for (const readOnly of ['id', 'createdAt', 'updatedAt', 'tenantId']) delete fields[readOnly];
        const narrowed = { ...fields, scopes: ['openid'], grantTypes: ['authorization_code'] };
        expect((await server.admin('PUT', `/clients/${made.client_id}`, narrowed)).status).to.equal(200);

        const updated = await manage(server, 'PUT', made.client_id, made.registration_access_token, {
          client_id: made.client_id,
          ...asked,
          client_name: 'Narrowed still',
        });
        expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
        expect(updated.body).to.include({ client_name: 'Narrowed still', scope: 'openid' });
        expect(updated.body.grant_types).to.deep.equal(['authorization_code']);
        const kept = (await server.admin('GET', `/clients/${made.client_id}`)).body;
        expect(kept).to.deep.include({ scopes: ['openid'], grantTypes: ['authorization_code'] });
      });

      it('lets a client an operator disabled read its registration, not change or delete it (403)', async function () {
        const made = (await register({ ...metadata, client_name: 'Switched off' })).body;
        const fields = (await server.admin('GET', `/clients/${made.client_id}`)).body;
        for (const readOnly of ['id', 'createdAt', 'updatedAt', 'tenantId']) delete fields[readOnly];
        expect(
          (await server.admin('PUT', `/clients/${made.client_id}`, { ...fields, enabled: false })).status,
        ).to.equal(200);
        const token = made.registration_access_token;
        expect((await manage(server, 'GET', made.client_id, token)).status).to.equal(200);
        const changed = await manage(server, 'PUT', made.client_id, token, {
          client_id: made.client_id,
          ...metadata,
          redirect_uris: ['https://attacker.example.test/cb'],
        });
        expect(changed.status, JSON.stringify(changed.body)).to.equal(403);
        expect(changed.body.error_description).to.contain('disabled');
        expect((await manage(server, 'DELETE', made.client_id, token)).status).to.equal(403);
        expect((await server.admin('GET', `/clients/${made.client_id}`)).body.redirectUris).to.deep.equal(
          metadata.redirect_uris,
        );
      });

      it('deletes a registration: 204, then the client is gone for /token and for its token', async function () {
        const { registration_access_token: token, client_secret: secret, client_id: clientId } = registered;
        expect((await tokenFor(clientId, secret)).status).to.equal(200);
        const deleted = await manage(server, 'DELETE', clientId, token);
        expect(deleted.status).to.equal(204);
        expect((await tokenFor(clientId, secret)).status).to.equal(401);
        expect((await manage(server, 'GET', clientId, token)).status).to.equal(401);
        expect((await server.admin('GET', `/clients/${clientId}`)).status).to.equal(404);
        expect((await manage(server, 'GET', other.client_id, other.registration_access_token)).status).to.equal(200);
      });
    });
  });
});

describe('dynamic client registration with SERVICE_SOFTWARE_STATEMENT_VERIFY=true', function () {
  let server: TestServer;
  let jwksServer: Server;
  let jwksFetches = 0;
  let signingKey: PrivateKey;
  let issuer: string;
  const metadata = { redirect_uris: ['https://app.example.test/cb'], grant_types: ['client_credentials'] };

  before(async function () {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    signingKey = privateKey as PrivateKey;
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'statement-key', alg: 'ES256', use: 'sig' }] };
    jwksServer = createServer((request, response) => {
      jwksFetches += 1;
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
    });
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}`;
    server = await readyServer({ SERVICE_SOFTWARE_STATEMENT_VERIFY: 'true' });
    await updateOauthData(server, (data) => {
      data.trusted_issuers = { [issuer]: { jwks_uri: `${issuer}/jwks`, uses: ['software_statement'] } };
    });
  });
  after(async function () {
    await server?.close();
    await new Promise((resolve) => jwksServer?.close(resolve));
  });

  const sign = (key: PrivateKey, claims: Record<string, unknown>, iss = issuer) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: 'statement-key' })
      .setIssuer(iss)
      .setIssuedAt()
      .sign(key);

  it('accepts a statement signed by a key of the issuer’s JWKS (fetched once, then cached), marked verified', async function () {
    const statement = await sign(signingKey, {
      software_id: '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b',
      granted_resources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }],
    });
    const first = await registerAt(server, { ...metadata, software_statement: statement });
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    expect(first.body.scope).to.equal('introspection');
    const second = await registerAt(server, { ...metadata, software_statement: statement });
    expect(second.status).to.equal(201);
    expect(jwksFetches).to.equal(1);
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/register&size=1&sort=id,desc')).body.content;
    expect(entry.policyInput.registration.software_statement.verified).to.equal(true);
  });

  it('refuses a statement signed by another key, an unsigned one, and one from an untrusted issuer', async function () {
    const { privateKey: otherKey } = await generateKeyPair('ES256');
    const forged = await registerAt(server, {
      ...metadata,
      software_statement: await sign(otherKey as PrivateKey, { software_id: '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b' }),
    });
    expect(forged.status).to.equal(400);
    expect(forged.body.error).to.equal('invalid_software_statement');
    const unsigned = await registerAt(server, {
      ...metadata,
      software_statement: new UnsecuredJWT({}).setIssuer(issuer).encode(),
    });
    expect(unsigned.body.error).to.equal('invalid_software_statement');
    const untrusted = await registerAt(server, {
      ...metadata,
      software_statement: await sign(signingKey, {}, 'https://elsewhere.example.test'),
    });
    expect(untrusted.status).to.equal(400);
    expect(untrusted.body.error).to.equal('invalid_software_statement');
  });
});

describe('dynamic client registration with initial access tokens', function () {
  let server: TestServer;
  const metadata = { redirect_uris: ['https://iat.example.test/cb'], token_endpoint_auth_method: 'none' };
  const registerWith = async (token: string | undefined, tenant?: string): Promise<Answer> => {
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      ...(token === undefined ? {} : { Authorization: `Bearer ${token}` }),
      ...(tenant ? { 'X-Tenant-Id': tenant } : {}),
    };
    const response = await server.request('/register', { method: 'POST', headers, body: JSON.stringify(metadata) });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
  };
  const issue = async (fields: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const created = await server.admin('POST', '/initial-access-tokens', fields, headers);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return created.body as { id: number; token: string };
  };

  before(async function () {
    server = await readyServer({ TENANTS: 'iat-tenant' });
  });
  after(async function () {
    await server?.close();
  });

  it('issues a token through the Admin API once, and keeps only its digest', async function () {
    const { id, token } = await issue({ name: 'partner onboarding', uses: 2 });
    expect(token).to.match(/^[A-Za-z0-9_-]{43}$/);
    const shown = await server.admin('GET', `/initial-access-tokens/${id}`);
    expect(shown.body).to.include({ name: 'partner onboarding', uses: 2, used: 0 });
    expect(JSON.stringify(shown.body)).not.to.contain(token);
    const record = (await server.store.collection('initial_access_tokens', '_default').get(id)) as any;
    expect(record.tokenDigest).to.equal(storageDigest(token));
    expect(JSON.stringify(record)).not.to.contain(token);
  });

  it('lets a registration through while open registration is off, as many times as allowed, and says which token in the policy input', async function () {
    expect((await registerWith(undefined)).status, 'open registration is off by default').to.equal(400);
    const { id, token } = await issue({ name: 'twice', uses: 2 });
    expect((await registerWith(token)).status).to.equal(201);
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/register&size=1&sort=id,desc')).body.content;
    expect(entry.policyInput.registration.initial_access_token).to.deep.equal({ id, name: 'twice' });
    expect((await registerWith(token)).status).to.equal(201);
    const third = await registerWith(token);
    expect(third.status, 'used up').to.equal(401);
    expect(third.body.error).to.equal('invalid_token');
    expect(third.headers.get('www-authenticate')).to.contain('invalid_token');
  });

  it("refuses unknown, expired and other tenants' tokens with 401 invalid_token", async function () {
    expect((await registerWith('made-up-token-value')).status).to.equal(401);
    const expired = await issue({ expiresAt: new Date(Date.now() - 1000).toISOString() });
    expect((await registerWith(expired.token)).status).to.equal(401);
    const elsewhere = await issue({ name: 'tenant only', tenantId: 'iat-tenant' });
    expect((await registerWith(elsewhere.token)).status, 'a token of another tenant').to.equal(401);
    expect((await registerWith(elsewhere.token, 'iat-tenant')).status, 'in its own tenant').to.equal(201);
  });

  it('is required once policy data says so: no token is 401 invalid_token, a valid one registers', async function () {
    await updateOauthData(server, (data) => {
      data.public_client_policy.enabled = true;
      data.public_client_policy.dcr.require_initial_access_token = true;
    });
    const without = await registerWith(undefined);
    expect(without.status).to.equal(401);
    expect(without.body.error).to.equal('invalid_token');
    expect(without.headers.get('www-authenticate')).to.contain('Bearer');
    const { token } = await issue({ uses: 1 });
    const registered = await registerWith(token);
    expect(registered.status).to.equal(201);

    // RFC 7592: the client updates itself with its registration access token, no initial access token.
    const update = async (accessToken: string) => {
      const response = await fetch(registered.body.registration_client_uri, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${accessToken}` },
        body: JSON.stringify({ ...metadata, client_id: registered.body.client_id, client_name: 'Renamed' }),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const updated = await update(registered.body.registration_access_token);
    expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
    expect(updated.body.client_name).to.equal('Renamed');
    await updateOauthData(server, (data) => {
      data.public_client_policy.enabled = false;
    });
    const closed = await update(updated.body.registration_access_token);
    expect(closed.status, `with open registration off: ${JSON.stringify(closed.body)}`).to.equal(200);
  });
});

/**
 * A client registered without an initial access token is kept for good. Found 2026-11-29: with
 * open registration on, one address registered 300 in a second, without end.
 */
describe('open registration, counted per address', function () {
  let server: TestServer;
  const metadata = { redirect_uris: ['https://app.example.test/cb'], token_endpoint_auth_method: 'none' };

  before(async function () {
    // Its own server: a budget of 3.
    server = await readyServer({ OPEN_REGISTRATIONS_PER_ADDRESS: '3', OPEN_REGISTRATIONS_WINDOW_SECONDS: '600' });
    await updateOauthData(server, (data) => {
      data.public_client_policy.enabled = true;
    });
  });
  after(async function () {
    await server?.close();
  });

  it('answers 429 with Retry-After past the budget; a refused registration costs none of it', async function () {
    await eventually(async () => (await registerAt(server, metadata)).status === 201);
    expect((await registerAt(server, { ...metadata, redirect_uris: ['not a uri'] })).status).to.equal(400);
    for (let made = 1; made < 3; made += 1) expect((await registerAt(server, metadata)).status).to.equal(201);
    const refused = await registerAt(server, metadata);
    expect(refused.status, JSON.stringify(refused.body)).to.equal(429);
    expect(refused.body).to.include({ error: 'too_many_requests' });
    expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
  });
});

/** Found 2026-11-30: the per-address budget alone let many addresses fill a tenant with clients kept for good. */
describe('open registration, bounded per tenant (OPEN_REGISTRATIONS_MAX_CLIENTS)', function () {
  let server: TestServer;
  const metadata = { redirect_uris: ['https://app.example.test/cb'], token_endpoint_auth_method: 'none' };

  before(async function () {
    // Its own server: a bound of 2.
    server = await readyServer({ OPEN_REGISTRATIONS_MAX_CLIENTS: '2' });
    await updateOauthData(server, (data) => {
      data.public_client_policy.enabled = true;
    });
  });
  after(async function () {
    await server?.close();
  });

  it('refuses an open registration once the tenant holds that many registered clients; one with an initial access token goes on', async function () {
    await eventually(async () => (await registerAt(server, metadata)).status === 201);
    expect((await registerAt(server, metadata)).status).to.equal(201);
    const refused = await registerAt(server, metadata);
    expect(refused.status, JSON.stringify(refused.body)).to.equal(403);
    expect(refused.body).to.include({ error: 'access_denied' });
    const { token } = (await server.admin('POST', '/initial-access-tokens', { name: 'partner', uses: 1 })).body;
    const withToken = await server.request('/register', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify(metadata),
    });
    expect(withToken.status, await withToken.clone().text()).to.equal(201);
    expect(await server.store.collection('clients', '_default').count({ registrationType: 'dcr' })).to.equal(3);
  });
});
