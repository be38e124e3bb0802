import { expect } from 'chai';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { basic, clientToken, confidentialClient, FORM } from '../support/oauth.js';
import { inTenant, withServer, type TestServer } from '../support/server.js';

const TENANT = 'introspection-jwt';
const API = 'https://jwt-introspection.example/';
const JWT_TYPE = 'application/token-introspection+jwt';

/**
 * Issue 39: JWT introspection responses (RFC 9701). A resource server that asks with
 * `Accept: application/token-introspection+jwt` gets the introspection answer as a JWT signed
 * with the tenant's keys: `typ` token-introspection+jwt, `iss` the tenant's issuer, `aud` the
 * caller, `iat`, and `token_introspection` the JSON answer it would otherwise get.
 */
describe('JWT introspection responses (RFC 9701)', function () {
  let shared: TestServer;
  let server: TestServer;
  let appSecret: string;
  const auth: Record<string, string> = {};

  before(async function () {
    shared = await withServer();
    // A tenant of its own on the shared server, reached by X-Tenant-Id (inTenant) and by path.
    server = inTenant(shared, TENANT);
    appSecret = await confidentialClient(server, 'jwt-app', { scopes: ['read'] });
    const rsSecret = await confidentialClient(server, 'jwt-rs', { scopes: ['introspection'] });
    const psSecret = await confidentialClient(server, 'jwt-rs-ps', {
      scopes: ['introspection'],
      introspectionSignedResponseAlg: 'RS256',
    });
    for (const [clientId, resourceIndicator] of [
      ['jwt-rs', API],
      ['jwt-rs-ps', `${API}ps/`],
    ]) {
      const { id } = (await server.admin('GET', `/clients/${clientId}`)).body;
      const created = await server.admin('POST', '/resource-servers', { resourceIndicator, clientId: id });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
    auth.basic = basic('jwt-rs', rsSecret);
    auth.bearerPs = `Bearer ${await clientToken(server, 'jwt-rs-ps', psSecret, { scope: 'introspection' })}`;
  });

  const appToken = () => clientToken(server, 'jwt-app', appSecret, { scope: 'read', resource: API });

  /** POST /introspect at `path` (through `via`), asking for `accept`; the raw answer. */
  async function introspect(
    token: string,
    authorization: string,
    accept?: string,
    via: TestServer = server,
    path = '/introspect',
  ): Promise<{ status: number; type: string; text: string }> {
    const response = await via.request(path, {
      method: 'POST',
      headers: { ...FORM, Authorization: authorization, ...(accept ? { Accept: accept } : {}) },
      body: new URLSearchParams({ token }).toString(),
    });
    return { status: response.status, type: response.headers.get('content-type') ?? '', text: await response.text() };
  }

  /** The tenant's published keys (its JWKS endpoint, through `via` at `path`). */
  async function tenantKeys(via: TestServer = server, path = '/.well-known/jwks.json') {
    const response = await via.request(path);
    expect(response.status).to.equal(200);
    return createLocalJWKSet((await response.json()) as JSONWebKeySet);
  }

  it('answers a JWT signed with the tenant keys, for the caller, holding the JSON answer', async function () {
    const token = await appToken();
    const json = await introspect(token, auth.basic!);
    expect(json.type).to.match(/^application\/json/);
    const answered = await introspect(token, auth.basic!, JWT_TYPE);
    expect(answered.status, answered.text).to.equal(200);
    expect(answered.type).to.equal(`${JWT_TYPE}; charset=utf-8`);
    const { payload, protectedHeader } = await jwtVerify(answered.text, await tenantKeys(), {
      issuer: shared.config.issuer,
      audience: 'jwt-rs',
      typ: 'token-introspection+jwt',
    });
    expect(protectedHeader.alg).to.equal('RS256');
    expect(payload.iat).to.be.a('number');
    expect(payload.token_introspection).to.deep.equal(JSON.parse(json.text));
    expect(payload.token_introspection).to.include({ active: true, client_id: 'jwt-app', aud: API, scope: 'read' });
  });

  it("signs with the caller's introspection_signed_response_alg, for a Bearer caller and an inactive token", async function () {
    const answered = await introspect('no-such-token', auth.bearerPs!, `${JWT_TYPE}, application/json;q=0.5`);
    expect(answered.status, answered.text).to.equal(200);
    expect(decodeProtectedHeader(answered.text).alg).to.equal('RS256');
    const { payload } = await jwtVerify(answered.text, await tenantKeys(), {
      issuer: shared.config.issuer,
      audience: 'jwt-rs-ps',
      typ: 'token-introspection+jwt',
    });
    expect(payload.token_introspection).to.deep.equal({ active: false });
  });

  it("answers a tenant reached by path with its own issuer, verified with that path's keys", async function () {
    const token = await appToken();
    const issuer = `${shared.config.issuer}/t/${TENANT}`;
    const answered = await introspect(token, auth.basic!, JWT_TYPE, shared, `/t/${TENANT}/introspect`);
    expect(answered.status, answered.text).to.equal(200);
    const keys = await tenantKeys(shared, `/t/${TENANT}/.well-known/jwks.json`);
    const { payload } = await jwtVerify(answered.text, keys, {
      issuer,
      audience: 'jwt-rs',
      typ: 'token-introspection+jwt',
    });
    expect(payload.token_introspection).to.include({ active: true, client_id: 'jwt-app', iss: issuer });
  });

  it('keeps errors JSON, and answers JSON to a caller that prefers it', async function () {
    const refused = await introspect('whatever', basic('jwt-rs', 'wrong-secret'), JWT_TYPE);
    expect(refused.status).to.equal(401);
    expect(refused.type).to.match(/^application\/json/);
    expect(JSON.parse(refused.text)).to.include({ error: 'invalid_client' });
    const preferred = await introspect('whatever', auth.basic!, `application/json, ${JWT_TYPE};q=0.5`);
    expect(preferred.type).to.match(/^application\/json/);
    expect(JSON.parse(preferred.text)).to.deep.equal({ active: false });
  });

  it('advertises the signing algorithms, and refuses one the tenant keys cannot sign with', async function () {
    const metadata = (await (await server.request('/.well-known/openid-configuration')).json()) as Record<
      string,
      unknown
    >;
    expect(metadata.introspection_signing_alg_values_supported).to.deep.equal(['RS256']);
    for (const alg of ['HS256', 'PS256']) {
      const refused = await server.admin('POST', '/clients', {
        clientId: 'jwt-rs-other',
        clientType: 'confidential',
        introspectionSignedResponseAlg: alg,
      });
      expect(refused.status, alg).to.equal(400);
    }
  });

  it("answers a JWT that is not one of this tenant's access tokens inactive, whoever asks", async function () {
    // An ID-token-like JWT: three segments, no access token of ours (oidc-provider alone refused JWTs with 400).
    const jwt = `${Buffer.from('{"alg":"none","typ":"at+jwt"}').toString('base64url')}.${Buffer.from('{"jti":"x"}').toString('base64url')}.c2ln`;
    for (const authorization of [auth.basic!, auth.bearerPs!]) {
      const answered = await introspect(jwt, authorization);
      expect(answered.status, answered.text).to.equal(200);
      expect(JSON.parse(answered.text)).to.deep.equal({ active: false });
    }
  });
});
