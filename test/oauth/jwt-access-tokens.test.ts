import { expect } from 'chai';
import {
  calculateJwkThumbprint,
  createRemoteJWKSet,
  decodeJwt,
  exportJWK,
  generateKeyPair,
  jwtVerify,
  SignJWT,
  type JWTPayload,
} from 'jose';
import { randomUUID } from 'node:crypto';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import {
  basic,
  clientCredentials,
  clientToken,
  confidentialClient,
  postForm,
  updateOauthData,
} from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * RFC 9068 JWT access tokens for the resource servers whose record asks for them
 * (`accessTokenFormat: "jwt"`): signed with the tenant's keys, carrying exactly what the policy
 * granted, for every grant that issues for a resource, and still introspectable and revocable.
 */
describe('JWT access tokens (RFC 9068)', function () {
  const LEDGER = 'https://ledger.jwt.example.test/';
  const OPAQUE = 'https://opaque.jwt.example.test/';
  const TYPE = 'urn:example:jwt-ledger';
  const ACME = 'jwt-acme';
  const REDIRECT_URI = 'http://127.0.0.1:1/jwt/callback';
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let secret: string;
  let callerToken: string;
  let rsSecret: string;

  before(async function () {
    // Its own server: the test changes the shared policy data.
    server = await readyServer();
    idp = await startRegisteredDevIdp(server);
    await updateOauthData(server, (data) => {
      data.resource_types[TYPE] = {
        scopes: ['ledger.read'],
        obligations: { log_access: true },
        extensions: { tier: 'gold' },
      };
    });
    secret = await confidentialClient(server, 'jwt-app', { scopes: ['ledger.read', 'ledger.write'] });
    rsSecret = await confidentialClient(server, 'jwt-rs', { scopes: ['introspection'] });
    callerToken = await clientToken(server, 'jwt-rs', rsSecret, { scope: 'introspection' });
    // The ledger's resource server introspects with its client's credentials (Basic) or a Bearer token.
    const rsClient = (await server.admin('GET', '/clients/jwt-rs')).body;
    for (const [resourceIndicator, fields] of [
      [LEDGER, { accessTokenFormat: 'jwt', clientId: rsClient.id }],
      [OPAQUE, {}],
    ] as const) {
      const created = await server.admin('POST', '/resource-servers', {
        resourceIndicator,
        typeUris: [TYPE],
        ...fields,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
  });

  after(async function () {
    await idp?.close();
    await server?.close();
  });

  const jwks = (issuer: string) => createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`));
  const verify = (token: string, issuer = server.config.issuer) =>
    jwtVerify(token, jwks(issuer), { issuer, typ: 'at+jwt', algorithms: ['RS256'] });
  const introspect = (token: string, authorization = `Bearer ${callerToken}`) =>
    postForm(server, '/introspect', { token }, { Authorization: authorization });

  /** The decision the audit recorded for the last token request of `clientId`. */
  async function lastTokenDecision(clientId: string): Promise<any> {
    const { body } = await server.admin('GET', `/audit-logs?endpoint=/token&clientId=${clientId}&size=1&sort=id,desc`);
    return body.content[0].policyDecision;
  }

  it('signs a client_credentials token for a jwt resource server with the tenant keys, carrying exactly the decision', async function () {
    const { status, body } = await clientCredentials(server, 'jwt-app', secret, {
      scope: 'ledger.read ledger.write',
      resource: LEDGER,
    });
    expect(status, JSON.stringify(body)).to.equal(200);
    const { payload, protectedHeader } = await verify(body.access_token);
    expect(protectedHeader).to.include({ typ: 'at+jwt', alg: 'RS256' });
    const decision = await lastTokenDecision('jwt-app');
    // The policy's ceiling for the type narrows what was asked: the JWT says so, as the response does.
    expect(payload.scope).to.equal('ledger.read');
    expect(body.scope).to.equal('ledger.read');
    expect(payload).to.include({ iss: server.config.issuer, aud: LEDGER, sub: 'jwt-app', client_id: 'jwt-app' });
    expect(payload.obligations).to.deep.equal(decision.obligations).and.deep.equal({ log_access: true });
    expect(payload.extensions).to.deep.equal(decision.extensions).and.deep.equal({ tier: 'gold' });
    expect(payload.jti).to.be.a('string');
    expect(payload.exp! - payload.iat!).to.equal(body.expires_in);
    // Never more than the decision: the registered claims and its output claims, nothing else.
    expect(Object.keys(payload).sort()).to.deep.equal(
      ['aud', 'client_id', 'exp', 'extensions', 'iat', 'iss', 'jti', 'obligations', 'scope', 'sub'].sort(),
    );
  });

  it('keeps tokens for any other resource opaque (the default)', async function () {
    for (const resource of [OPAQUE, 'https://unregistered.jwt.example.test/']) {
      const { status, body } = await clientCredentials(server, 'jwt-app', secret, { scope: 'ledger.read', resource });
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.access_token, resource).to.match(/^[A-Za-z0-9_-]+$/);
    }
  });

  it('introspects a JWT access token as its record says, never by its jti alone, and revokes it', async function () {
    const token = await clientToken(server, 'jwt-app', secret, { scope: 'ledger.read', resource: LEDGER });
    const { jti } = decodeJwt(token);
    const active = await introspect(token);
    expect(active.status).to.equal(200);
    expect(active.body).to.include({ active: true, scope: 'ledger.read', client_id: 'jwt-app' });
    expect(active.body.obligations).to.deep.equal({ log_access: true });
    const withBasic = await introspect(token, basic('jwt-rs', rsSecret));
    expect(withBasic.status, JSON.stringify(withBasic.body)).to.equal(200);
    expect(withBasic.body).to.include({ active: true, scope: 'ledger.read', client_id: 'jwt-app' });
    // A resource server may log the jti: it must not be usable as a token.
    expect((await introspect(jti as string)).body).to.deep.equal({ active: false });
    // Another issuer's (here: a self-signed) JWT with the same jti is unknown too.
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT({ ...decodeJwt(token) })
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt' })
      .sign(privateKey);
    expect((await introspect(forged)).body).to.deep.equal({ active: false });

    const revoked = await postForm(server, '/revoke', { token }, { Authorization: basic('jwt-app', secret) });
    expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
    expect((await introspect(token)).body).to.deep.equal({ active: false });
    expect((await introspect(token, basic('jwt-rs', rsSecret))).body).to.deep.equal({ active: false });
    // RFC 7009 §2.2: an unknown token (here another issuer's JWT) is a 200 that changes nothing.
    const unknown = await postForm(server, '/revoke', { token: forged }, { Authorization: basic('jwt-app', secret) });
    expect(unknown.status, JSON.stringify(unknown.body)).to.equal(200);
  });

  it('binds a DPoP token with cnf.jkt', async function () {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const jwk = await exportJWK(publicKey);
    const proof = await new SignJWT({ htm: 'POST', htu: `${server.config.issuer}/token`, jti: randomUUID() })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
      .setIssuedAt()
      .sign(privateKey);
    const { status, body } = await clientCredentials(
      server,
      'jwt-app',
      secret,
      { scope: 'ledger.read', resource: LEDGER },
      { DPoP: proof },
    );
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.token_type).to.equal('DPoP');
    const { payload } = await verify(body.access_token);
    expect(payload.cnf).to.deep.equal({ jkt: await calculateJwkThumbprint(jwk) });
  });

  /** A new public client, alice's sign-in for `resource`, and its code redeemed. */
  async function redeemedSignIn(clientId: string, resource: string) {
    const testClient = { clientId, redirectUri: REDIRECT_URI };
    const created = await server.admin('POST', '/clients', {
      clientId,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [REDIRECT_URI],
      scopes: ['openid', 'ledger.read'],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const request = await authorizationRequest(server, testClient, { scope: 'openid ledger.read', resource });
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(request.url, arrivingAt(REDIRECT_URI));
    const arrived = (await passDevIdpForms(agent, loginPage, 'alice', arrivingAt(REDIRECT_URI))).url;
    const code = arrived.searchParams.get('code');
    expect(code, arrived.href).to.be.a('string');
    const redeemed = await redeemCode(server, testClient, code!, request.codeVerifier);
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    return { testClient, redeemed };
  }

  it("issues JWTs for a user's code and refresh token, with the user's sub and auth_time", async function () {
    const { testClient, redeemed } = await redeemedSignIn('jwt-spa', LEDGER);
    const first = (await verify(redeemed.body.access_token)).payload;
    expectUserToken(first, testClient.clientId);

    const refreshed = await postForm(server, '/token', {
      grant_type: 'refresh_token',
      refresh_token: redeemed.body.refresh_token,
      client_id: testClient.clientId,
    });
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
    const second = (await verify(refreshed.body.access_token)).payload;
    expectUserToken(second, testClient.clientId);
    expect(second.sub).to.equal(first.sub);
    expect(second.auth_time).to.equal(first.auth_time);
    // Revoking the refresh token ends its grant, and so the JWT access tokens issued under it.
    expect((await introspect(refreshed.body.access_token)).body.active).to.equal(true);
    const revoked = await postForm(server, '/revoke', {
      token: refreshed.body.refresh_token,
      client_id: testClient.clientId,
    });
    expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
    expect((await introspect(refreshed.body.access_token)).body).to.deep.equal({ active: false });
  });

  // Found 2026-11-30: a refresh answered a new refresh token whatever the decision said, so a
  // policy that began to withhold them (or withheld them for another resource) never took effect.
  it('refuses a refresh the policy answers with extensions.issue_refresh_token false, using nothing up', async function () {
    const { testClient, redeemed } = await redeemedSignIn('jwt-withheld-spa', OPAQUE);
    expect(redeemed.body.refresh_token, JSON.stringify(redeemed.body)).to.be.a('string');
    const refresh = () =>
      postForm(server, '/token', {
        grant_type: 'refresh_token',
        refresh_token: redeemed.body.refresh_token,
        client_id: testClient.clientId,
      });
    const withheld = (value: boolean | undefined) =>
      updateOauthData(server, (data) => {
        const extensions = { ...data.resource_types[TYPE].extensions };
        if (value === undefined) delete extensions.issue_refresh_token;
        else extensions.issue_refresh_token = value;
        data.resource_types[TYPE].extensions = extensions;
      });
    await withheld(false);
    try {
      const refused = await refresh();
      expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
      expect(refused.body.error).to.equal('invalid_grant');
    } finally {
      await withheld(undefined);
    }
    // The refresh token was not used up by the refusal.
    const refreshed = await refresh();
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
  });

  function expectUserToken(payload: JWTPayload, clientId: string): void {
    expect(payload).to.include({ aud: LEDGER, client_id: clientId, scope: 'ledger.read' });
    expect(payload.sub).to.be.a('string').and.not.equal(clientId);
    expect(payload.auth_time).to.be.a('number');
  }

  it('issues a JWT through token exchange for a jwt resource server, from a JWT subject token', async function () {
    const subject = await clientToken(server, 'jwt-app', secret, { scope: 'ledger.read', resource: LEDGER });
    const { status, body } = await postForm(
      server,
      '/token',
      {
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: subject,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        resource: LEDGER,
        scope: 'ledger.read',
      },
      { Authorization: basic('jwt-app', secret) },
    );
    expect(status, JSON.stringify(body)).to.equal(200);
    const { payload } = await verify(body.access_token);
    expect(payload).to.include({ aud: LEDGER, client_id: 'jwt-app', scope: 'ledger.read' });
    expect(payload, 'the tokens it lives by are kept server-side').not.to.have.property('exchanged_from');
  });

  it("signs a path tenant's JWTs with its own keys under its own issuer", async function () {
    const acmeSecret = await confidentialClient(server, 'jwt-app', { scopes: ['ledger.read'] }, ACME);
    const created = await server.admin('POST', '/resource-servers', {
      resourceIndicator: LEDGER,
      typeUris: [TYPE],
      accessTokenFormat: 'jwt',
      tenantId: ACME,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const issuer = `${server.config.issuer}/t/${ACME}`;
    const { status, body } = await postForm(
      server,
      `/t/${ACME}/token`,
      { grant_type: 'client_credentials', scope: 'ledger.read', resource: LEDGER },
      { Authorization: basic('jwt-app', acmeSecret) },
    );
    expect(status, JSON.stringify(body)).to.equal(200);
    const { payload } = await verify(body.access_token, issuer);
    expect(payload).to.include({ iss: issuer, aud: LEDGER });
    const withDefaultKeys = await jwtVerify(body.access_token, jwks(server.config.issuer)).then(
      () => 'verified',
      (error: Error) => error.name,
    );
    expect(withDefaultKeys, "the default tenant's keys").to.not.equal('verified');
    // Another tenant knows nothing of it; its own tenant introspects and revokes it.
    expect((await introspect(body.access_token)).body).to.deep.equal({ active: false });
    const acmeRsSecret = await confidentialClient(server, 'jwt-rs', { scopes: ['introspection'] }, ACME);
    const acmeCaller = await postForm(
      server,
      `/t/${ACME}/token`,
      { grant_type: 'client_credentials', scope: 'introspection' },
      { Authorization: basic('jwt-rs', acmeRsSecret) },
    );
    const introspectInAcme = async () =>
      (
        await postForm(
          server,
          `/t/${ACME}/introspect`,
          { token: body.access_token },
          { Authorization: `Bearer ${acmeCaller.body.access_token}` },
        )
      ).body;
    expect(await introspectInAcme()).to.include({ active: true, iss: issuer });
    const revoked = await postForm(
      server,
      `/t/${ACME}/revoke`,
      { token: body.access_token },
      { Authorization: basic('jwt-app', acmeSecret) },
    );
    expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
    expect(await introspectInAcme()).to.deep.equal({ active: false });
  });
});
