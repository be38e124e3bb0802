import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { DEV_IDP_CLIENT } from '../../src/dev-idp/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { basic, postForm } from '../support/oauth.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';

/**
 * A whole session's worth of flows — Admin writes with secrets, every client authentication,
 * a failed one, introspection, a browser sign-in with its code, tokens, refresh and UserInfo —
 * then every log line, every audit entry and the raw bytes of the SQLite store are searched
 * for each secret and token value the session used. None may be there.
 */
/** A production-like sealing key (from outside the store), as SERVICE_SECRETS_KEY would be. */
const SECRETS_KEY = randomBytes(32).toString('base64url');

describe('Secrets never leak into logs, audit entries or the store', function () {
  this.timeout(120_000);
  const TENANT = 'leak-t';
  const REDIRECT = 'http://127.0.0.1:1/leak/cb';
  const logLines: string[] = [];
  /** Values that may appear nowhere. */
  const secrets: { label: string; value: string }[] = [];
  /** Values that the store keeps on purpose (BCrypt hashes), but that no log line or audit entry may show. */
  const storedOnPurpose: { label: string; value: string }[] = [];
  let server: TestServer;
  let idp: RegisteredDevIdp | undefined;
  let auditText: string;
  let auditCount: number;
  let storeFiles: { file: string; bytes: Buffer }[];

  const random = (prefix: string) => `${prefix}-${randomBytes(18).toString('base64url')}`;
  function secret(label: string, value: string | undefined): string {
    if (typeof value !== 'string' || value === '') throw new Error(`the session produced no ${label}`);
    secrets.push({ label, value });
    return value;
  }

  before(async function () {
    // Its own server: every log line it writes is searched for secrets.
    server = await readyServer(
      { LOG_LEVEL: 'debug', TENANTS: TENANT, SERVICE_SECRETS_KEY: SECRETS_KEY },
      { logStream: { write: (line: string) => void logLines.push(line) } },
    );
    await runSession();
    auditText = '';
    auditCount = 0;
    for (const [query, headers] of [
      ['', {}],
      ['', { 'X-Tenant-Id': TENANT }],
      ['&allTenants=true', {}],
    ] as const) {
      for (let page = 0; ; page++) {
        const { status, body } = await server.admin(
          'GET',
          `/audit-logs?size=1000&page=${page}${query}`,
          undefined,
          headers,
        );
        expect(status, JSON.stringify(body)).to.equal(200);
        auditText += JSON.stringify(body.content);
        auditCount += body.content.length;
        if (body.content.length < 1000) break;
      }
    }
    const file = server.config.storeUrl.replace(/^sqlite:/, '');
    storeFiles = ['', '-wal', '-shm']
      .map((suffix) => `${file}${suffix}`)
      .filter((path) => existsSync(path))
      .map((path) => ({ file: path, bytes: readFileSync(path) }));
  });

  after(async function () {
    await idp?.close();
    await server?.close();
  });

  async function admin(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<any> {
    const answer = await server.admin(method, path, body, headers);
    if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }

  async function clientCredentials(
    form: Record<string, string>,
    headers: Record<string, string> = {},
  ): Promise<string> {
    const { status, body } = await postForm(server, '/token', { grant_type: 'client_credentials', ...form }, headers);
    if (status !== 200) throw new Error(`client_credentials: ${status} ${JSON.stringify(body)}`);
    return body.access_token;
  }

  /** Records the plain secret and its Basic header value (a log that kept the header would show the base64). */
  function basicOf(clientId: string, plain: string): string {
    const header = basic(clientId, plain);
    secret(`Basic credentials of ${clientId}`, header.slice('Basic '.length));
    return header;
  }

  async function confidential(
    clientId: string,
    fields: Record<string, unknown> = {},
    tenantId?: string,
  ): Promise<string> {
    const plain = secret(`client secret of ${clientId}${tenantId ? ` in ${tenantId}` : ''}`, random(clientId));
    const hash = bcrypt.hashSync(plain, 4);
    storedOnPurpose.push({ label: `BCrypt hash of ${clientId}'s secret`, value: hash });
    await admin('POST', '/clients', {
      clientId,
      clientType: 'confidential',
      clientSecret: hash,
      ...(tenantId ? { tenantId } : {}),
      ...fields,
    });
    return plain;
  }

  async function runSession(): Promise<void> {
    secret('Admin API key', ADMIN_KEY);
    // Named Admin API keys: one used for a write and a read, one used once and revoked, then presented again (401).
    const named = await admin('POST', '/api-keys', { name: 'leak-operator', role: 'operator' });
    secret('named Admin API key', named.key);
    await admin('GET', '/clients', undefined, { 'X-Admin-API-Key': named.key });
    await admin('POST', '/subjects', { subjectId: 'leak-by-named-key' }, { 'X-Admin-API-Key': named.key });
    const revoked = await admin('POST', '/api-keys', { name: 'leak-revoked', role: 'read-only' });
    secret('revoked Admin API key', revoked.key);
    await admin('DELETE', `/api-keys/${revoked.id}`);
    expect((await server.admin('GET', '/clients', undefined, { 'X-Admin-API-Key': revoked.key })).status).to.equal(401);

    // Admin writes: identity providers with client secrets, clients with BCrypt hashes, a resource server.
    idp = await startRegisteredDevIdp(server);
    secret('upstream client secret of the dev IdP', DEV_IDP_CLIENT.clientSecret);
    const upstream = secret('upstream client secret of a second IdP', random('upstream'));
    await admin('POST', '/identity-providers', {
      idpId: 'leak-second',
      issuer: 'http://127.0.0.1:1',
      clientId: 'arbiter-second',
      clientSecret: upstream,
      enabled: false,
    });
    const replaced = secret('upstream client secret after a PUT', random('upstream-put'));
    await admin('PUT', '/identity-providers/leak-second', {
      idpId: 'leak-second',
      issuer: 'http://127.0.0.1:1',
      clientId: 'arbiter-second',
      clientSecret: replaced,
      enabled: false,
    });
    await admin('POST', '/identity-providers', {
      idpId: 'leak-tenant-idp',
      issuer: 'http://127.0.0.1:1',
      clientId: 'arbiter-t',
      clientSecret: secret('upstream client secret in a tenant', random('upstream-t')),
      tenantId: TENANT,
      enabled: false,
    });

    const appSecret = await confidential('leak-app', { scopes: ['read', 'write'] });
    const postSecret = await confidential('leak-post', {
      scopes: ['read'],
      tokenEndpointAuthMethod: 'client_secret_post',
    });
    const rsSecret = await confidential('leak-rs', { scopes: ['introspection'] });
    const tenantSecret = await confidential('leak-app', { scopes: ['read'] }, TENANT);
    const rs = await admin('GET', '/clients/leak-rs');
    await admin('POST', '/resource-servers', {
      resourceIndicator: 'https://api.leak.test/',
      clientId: rs.id,
      typeUris: ['urn:leak:api'],
    });
    const rotatedSecret = await confidential('leak-rotated', { scopes: ['read'] });
    const newHash = bcrypt.hashSync(secret('client secret after a PUT', random('leak-rotated-2')), 4);
    storedOnPurpose.push({ label: 'BCrypt hash after a PUT', value: newHash });
    await admin('PUT', '/clients/leak-rotated', {
      clientId: 'leak-rotated',
      clientType: 'confidential',
      clientSecret: newHash,
      scopes: ['read'],
    });
    void rotatedSecret;
    // Secrets given to the Admin API in clear, and one it generates: only their hashes may be kept.
    const plainSecret = secret('client secret given in clear', random('leak-plain'));
    await admin('POST', '/clients', {
      clientId: 'leak-plain',
      clientType: 'confidential',
      clientSecret: plainSecret,
      scopes: ['read'],
    });
    const generated = await admin('POST', '/clients', {
      clientId: 'leak-generated',
      clientType: 'confidential',
      generateClientSecret: true,
      scopes: ['read'],
    });
    secret('client secret the Admin API generated', generated.generatedClientSecret);
    const generatedSecret = secret(
      'client secret generated again by a PUT',
      (
        await admin('PUT', '/clients/leak-generated', {
          clientId: 'leak-generated',
          clientType: 'confidential',
          generateClientSecret: true,
          scopes: ['read'],
        })
      ).generatedClientSecret,
    );
    await clientCredentials({ scope: 'read' }, { Authorization: basicOf('leak-plain', plainSecret) });
    await clientCredentials({ scope: 'read' }, { Authorization: basicOf('leak-generated', generatedSecret) });

    // client_credentials with client_secret_basic and client_secret_post; failed authentications.
    const basicToken = secret(
      'access token (client_secret_basic)',
      await clientCredentials({ scope: 'read' }, { Authorization: basicOf('leak-app', appSecret) }),
    );
    const postToken = secret(
      'access token (client_secret_post)',
      await clientCredentials({ scope: 'read', client_id: 'leak-post', client_secret: postSecret }),
    );
    const wrong = secret('a wrong client secret', random('wrong'));
    for (const attempt of [
      postForm(server, '/token', { grant_type: 'client_credentials' }, { Authorization: basicOf('leak-app', wrong) }),
      postForm(server, '/token', { grant_type: 'client_credentials', client_id: 'leak-post', client_secret: wrong }),
    ]) {
      expect((await attempt).status).to.equal(401);
    }
    secret(
      'access token in a tenant',
      await clientCredentials(
        { scope: 'read' },
        { Authorization: basicOf('leak-app', tenantSecret), 'X-Tenant-Id': TENANT },
      ),
    );

    // Introspection: a client authenticated with Basic, and a Bearer caller.
    const caller = secret(
      'introspection caller token',
      await clientCredentials({ scope: 'introspection' }, { Authorization: basicOf('leak-rs', rsSecret) }),
    );
    const byBasic = await postForm(
      server,
      '/introspect',
      { token: basicToken },
      { Authorization: basic('leak-rs', rsSecret) },
    );
    expect(byBasic.body.active, JSON.stringify(byBasic.body)).to.equal(true);
    const byBearer = await postForm(server, '/introspect', { token: postToken }, { Authorization: `Bearer ${caller}` });
    expect(byBearer.body.active, JSON.stringify(byBearer.body)).to.equal(true);

    // A sign-in through the dev IdP: code, tokens, refresh rotation, UserInfo.
    const spa = await registerPublicClient(server, REDIRECT, { clientId: 'leak-spa' });
    const request = await authorizationRequest(server, spa, { nonce: random('nonce') });
    secret('code_verifier', request.codeVerifier);
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(request.url, arrivingAt(REDIRECT));
    const arrived = await passDevIdpForms(agent, loginPage, 'alice', arrivingAt(REDIRECT));
    const code = secret('authorization code', arrived.url.searchParams.get('code') ?? undefined);
    const redeemed = await redeemCode(server, spa, code, request.codeVerifier);
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    const userToken = secret('access token (code grant)', redeemed.body.access_token);
    const refreshToken = secret('refresh token', redeemed.body.refresh_token);
    const idToken = secret('ID token', redeemed.body.id_token);

    // A silent re-authentication names the session's ID token (id_token_hint): the authorize decision's input must not keep it.
    const second = await authorizationRequest(server, spa, { id_token_hint: idToken });
    secret('second code_verifier', second.codeVerifier);
    const again = await agent.navigate(second.url, arrivingAt(REDIRECT));
    const secondCode = secret(
      'second authorization code',
      (again.url.href.startsWith(REDIRECT)
        ? again
        : await passDevIdpForms(agent, again, 'alice', arrivingAt(REDIRECT))
      ).url.searchParams.get('code') ?? undefined,
    );
    const secondTokens = await redeemCode(server, spa, secondCode, second.codeVerifier);
    expect(secondTokens.status, JSON.stringify(secondTokens.body)).to.equal(200);
    secret('access token (second code grant)', secondTokens.body.access_token);
    const secondRefresh = secret('second refresh token', secondTokens.body.refresh_token);
    secret('second ID token', secondTokens.body.id_token);

    const rotated = await postForm(server, '/token', {
      grant_type: 'refresh_token',
      refresh_token: secondRefresh,
      client_id: spa.clientId,
    });
    expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
    const rotatedAccess = secret('access token (refresh)', rotated.body.access_token);
    secret('rotated refresh token', rotated.body.refresh_token);

    for (const token of [userToken, rotatedAccess]) {
      const userinfo = await server.request('/userinfo', { headers: { Authorization: `Bearer ${token}` } });
      expect(userinfo.status, `UserInfo with the ${token === userToken ? 'first' : 'refreshed'} access token`).to.equal(
        200,
      );
      await userinfo.body?.cancel();
    }
    const posted = await postForm(server, '/userinfo', { access_token: rotatedAccess });
    expect(posted.status).to.be.oneOf([200, 400, 401]);
    const refreshIntrospected = await postForm(
      server,
      '/introspect',
      { token: refreshToken, token_type_hint: 'refresh_token' },
      { Authorization: `Bearer ${caller}` },
    );
    expect(refreshIntrospected.status).to.equal(200);
    // Last, since each revokes what was issued before: the replaced refresh token again, a second use of the code.
    const stale = await postForm(server, '/token', {
      grant_type: 'refresh_token',
      refresh_token: secondRefresh,
      client_id: spa.clientId,
    });
    expect(stale.status, 'the replaced refresh token').to.equal(400);
    const reused = await redeemCode(server, spa, code, request.codeVerifier);
    expect(reused.status, 'a second use of the code').to.equal(400);
  }

  /** The labels of the values found in `haystack`. */
  function found(haystack: string | Buffer, values: { label: string; value: string }[]): string[] {
    return values.filter(({ value }) => haystack.includes(value)).map(({ label }) => label);
  }

  it('ran the whole session, and the server logged it', function () {
    expect(secrets.length).to.be.greaterThan(25);
    expect(logLines.length, 'LOG_LEVEL=debug logs something').to.be.greaterThan(0);
    for (const line of logLines) expect(() => JSON.parse(line), line).not.to.throw();
  });

  it('writes no secret, token or code to the log', function () {
    const leaks = logLines.flatMap((line) =>
      found(line, [...secrets, ...storedOnPurpose]).map((label) => `${label} in: ${line.slice(0, 300)}`),
    );
    expect(leaks).to.deep.equal([]);
  });

  it('keeps no secret, token or code in an audit entry (any tenant)', function () {
    expect(auditCount, 'the session was audited').to.be.greaterThan(20);
    expect(found(auditText, [...secrets, ...storedOnPurpose])).to.deep.equal([]);
  });

  it('stores no secret, token or code in clear (SQLite file and WAL)', function () {
    expect(storeFiles.length, 'the SQLite file is there').to.be.greaterThan(0);
    // The scan reads what the store holds: the BCrypt hashes it keeps on purpose are found.
    const everything = Buffer.concat(storeFiles.map(({ bytes }) => bytes));
    expect(found(everything, storedOnPurpose), 'BCrypt hashes found in the store').to.include.members([
      'BCrypt hash after a PUT',
    ]);
    const leaks = storeFiles.flatMap(({ file, bytes }) =>
      found(bytes, secrets).map((label) => `${label} in ${file.split('/').pop()}`),
    );
    expect(leaks).to.deep.equal([]);
  });

  it("keeps the server's private signing key only sealed in the store", function () {
    // A private RSA JWK in clear has a "d" member; sealed (AES-GCM, base64url) it has none.
    const privateMember = /"d"\s*:\s*"[A-Za-z0-9_-]{100,}"/;
    for (const { file, bytes } of storeFiles)
      expect(privateMember.test(bytes.toString('latin1')), file).to.equal(false);
  });
});
