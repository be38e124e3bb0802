import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

type KeyLike = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
import { createServer, type Server } from 'node:http';
import {
  registerPublicClient,
  signInForTokens,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { basic, clientToken, confidentialClient, eventually, postForm, updateOauthData } from '../support/oauth.js';
import { freePort, readyServer, type TestServer } from '../support/server.js';
import { userToken } from '../uma/support.js';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const API = 'https://invoices.example.test/';
const INVOICES = 'urn:example:invoices';
const PROFILE = 'urn:example:profile';
const REDIRECT_URI = 'http://127.0.0.1:1/exchange-rp/callback';

/** RFC 8693 token exchange at POST /token (spec: POST /token token-exchange rows; id-token exchange errors). */
describe('POST /token: token exchange (RFC 8693)', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let jwks: Server;
  let issuer: string;
  let signingKey: KeyLike;
  let exchangerSecret: string;
  let frontendSecret: string;
  let rsToken: string;
  let unreachableIssuer: string;

  before(async function () {
    // Its own server: the test changes the policy data and registers an identity provider.
    server = await readyServer();
    idp = await startRegisteredDevIdp(server);
    exchangerSecret = await confidentialClient(server, 'billing', {
      scopes: ['openid', 'profile', 'email', 'invoices.read'],
      redirectUris: [REDIRECT_URI],
    });
    frontendSecret = await confidentialClient(server, 'frontend', { scopes: ['invoices.read', 'invoices.write'] });
    const rsSecret = await confidentialClient(server, 'invoices-rs', { scopes: ['introspection'] });
    const rsClient = (await server.admin('GET', '/clients/invoices-rs')).body;
    await server.admin('POST', '/resource-servers', {
      resourceIndicator: API,
      clientId: rsClient.id,
      typeUris: [INVOICES],
    });
    rsToken = await clientToken(server, 'invoices-rs', rsSecret, { scope: 'introspection' });

    // An external issuer: a key pair whose public half a loopback JWKS endpoint serves.
    const pair = await generateKeyPair('RS256');
    signingKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'idp-key', alg: 'RS256', use: 'sig' };
    jwks = createServer((request, response) => {
      response.writeHead(request.url === '/jwks' ? 200 : 404, { 'Content-Type': 'application/json' });
      response.end(JSON.stringify(request.url === '/jwks' ? { keys: [jwk] } : {}));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(jwks.address() as { port: number }).port}`;
    unreachableIssuer = `http://127.0.0.1:${await freePort()}`;
    await updateOauthData(server, (data) => {
      data.resource_types[INVOICES] = {
        scopes: ['invoices.read', 'invoices.write'],
        obligations: { log_access: true },
      };
      data.resource_types[PROFILE] = { scopes: ['openid', 'profile', 'email'], obligations: { audit: 'profile' } };
      data.trusted_issuers = {
        [issuer]: { jwks_uri: `${issuer}/jwks` },
        [unreachableIssuer]: { jwks_uri: `${unreachableIssuer}/jwks` },
      };
    });
  });

  after(async function () {
    await new Promise((resolve) => jwks?.close(resolve));
    await idp?.close();
    await server?.close();
  });

  const exchange = (
    form: Record<string, string>,
    clientId = 'billing',
    secret = exchangerSecret,
    headers: Record<string, string> = {},
  ) =>
    postForm(
      server,
      '/token',
      { grant_type: EXCHANGE, ...form },
      { Authorization: basic(clientId, secret), ...headers },
    );
  const introspect = (token: string) =>
    postForm(server, '/introspect', { token }, { Authorization: `Bearer ${rsToken}` });
  const frontendToken = async (scope = 'invoices.read invoices.write') =>
    await clientToken(server, 'frontend', frontendSecret, { scope });

  /**
   * alice signs in through the dev IdP at billing itself; her access token (openid profile email).
   * A client exchanges its own tokens (another client's only with may_act or a delegation:
   * test/security/bound-token-laundering.test.ts).
   */
  const userAccessToken = () =>
    userToken(server, { clientId: 'billing', redirectUri: REDIRECT_URI, secret: exchangerSecret }, 'alice', {
      scope: 'openid profile email',
    });
  const asFrontend = (form: Record<string, string>) => exchange(form, 'frontend', frontendSecret);

  const idToken = (claims: Record<string, unknown>, key: KeyLike = signingKey, kid = 'idp-key') =>
    new SignJWT({ aud: 'billing', email: 'carol@example.test', ...claims })
      .setProtectedHeader({ alg: 'RS256', kid })
      .sign(key);
  const validIdClaims = () => ({
    iss: issuer,
    sub: 'carol',
    iat: Math.floor(Date.now() / 1000),
    exp: Math.floor(Date.now() / 1000) + 300,
  });

  describe('an access token of this server as subject token', function () {
    it("exchanges a user's token for a narrower one: the subject's sub, the policy's scopes and obligations at introspection; the subject token stays valid", async function () {
      const subjectToken = await userAccessToken();
      const { status, body, headers } = await exchange({
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN,
        scope: 'profile',
        resource_type: PROFILE,
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body).to.include({ token_type: 'Bearer', scope: 'profile', issued_token_type: ACCESS_TOKEN });
      expect(body.access_token).to.be.a('string').and.not.equal(subjectToken);
      expect(body.expires_in).to.be.a('number');
      expect(body).not.to.have.property('refresh_token');
      expect(headers.get('cache-control')).to.equal('no-store');
      const issued = await introspect(body.access_token);
      expect(issued.body).to.include({ active: true, sub: 'alice', client_id: 'billing', scope: 'profile' });
      expect(issued.body.obligations).to.deep.equal({ audit: 'profile' });
      const subject = await introspect(subjectToken);
      expect(subject.body.active, 'the subject token stays valid').to.equal(true);
      const userinfo = await server.request('/userinfo', { headers: { Authorization: `Bearer ${subjectToken}` } });
      expect(userinfo.status).to.equal(200);
    });

    it("resolves the resource to its type for the policy: the type's obligations are kept with the token, and the token is for that resource", async function () {
      const subjectToken = await frontendToken();
      const { status, body } = await asFrontend({
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN,
        scope: 'invoices.read',
        resource: API,
        audience: INVOICES,
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.scope).to.equal('invoices.read');
      const issued = await introspect(body.access_token);
      expect(issued.body).to.include({ active: true, scope: 'invoices.read', client_id: 'frontend', resource: API });
      expect(issued.body.resource_types).to.deep.equal([INVOICES]);
      expect(issued.body.obligations).to.deep.equal({ log_access: true });
    });

    it("keeps the subject token's resource when the exchange names none: never a token without an audience", async function () {
      const subjectToken = await clientToken(server, 'frontend', frontendSecret, {
        scope: 'invoices.read',
        resource: API,
      });
      expect((await introspect(subjectToken)).body).to.include({ active: true, resource: API });
      const { status, body } = await asFrontend({ subject_token: subjectToken, subject_token_type: ACCESS_TOKEN });
      expect(status, JSON.stringify(body)).to.equal(200);
      expect((await introspect(body.access_token)).body).to.include({ active: true, resource: API });
    });

    it('never issues a token that outlives its subject token, exchanged again and again', async function () {
      let subjectToken = await frontendToken('invoices.read');
      const { exp: subjectEnd, iat } = (await introspect(subjectToken)).body as { exp: number; iat: number };
      // A second later, a token of the usual lifetime would end after the subject token.
      await eventually(async () => Math.floor(Date.now() / 1000) > iat, 5_000);
      for (let round = 0; round < 2; round += 1) {
        const { status, body } = await asFrontend({ subject_token: subjectToken, subject_token_type: ACCESS_TOKEN });
        expect(status, JSON.stringify(body)).to.equal(200);
        const issued = (await introspect(body.access_token)).body;
        expect(issued.active).to.equal(true);
        expect(issued.exp, `round ${round}`).to.be.at.most(subjectEnd);
        subjectToken = body.access_token;
      }
    });

    it('ends every token exchanged from a token once that token, or its grant, is revoked', async function () {
      const billing = { clientId: 'billing', redirectUri: REDIRECT_URI, secret: exchangerSecret };
      const revoke = (token: string) =>
        postForm(server, '/revoke', { token }, { Authorization: basic('billing', exchangerSecret) });
      const exchanged = async (subjectToken: string) => {
        const { status, body } = await exchange(exchangeOf(subjectToken));
        expect(status, JSON.stringify(body)).to.equal(200);
        return body.access_token as string;
      };
      const active = async (token: string) => (await introspect(token)).body.active;
      const exchangeOf = (subjectToken: string) => ({ subject_token: subjectToken, subject_token_type: ACCESS_TOKEN });

      // The grant: alice's refresh token revoked (RFC 7009 §2.1) takes her access token and every exchange of it.
      const signedIn = await signInForTokens(server, billing, 'alice', { scope: 'openid profile email' });
      const once = await exchanged(signedIn.access);
      const twice = await exchanged(once);
      expect([await active(once), await active(twice)]).to.deep.equal([true, true]);
      expect((await revoke(signedIn.refresh)).status).to.equal(200);
      expect(await active(signedIn.access)).to.equal(false);
      expect([await active(once), await active(twice)], 'exchanged once, then twice').to.deep.equal([false, false]);
      const userinfo = await server.request('/userinfo', { headers: { Authorization: `Bearer ${once}` } });
      expect(userinfo.status).to.equal(401);

      // A client's own token (no grant) revoked: what was exchanged from it ends, and nothing else.
      const revokeOwn = (token: string) =>
        postForm(server, '/revoke', { token }, { Authorization: basic('frontend', frontendSecret) });
      const [first, second] = [await frontendToken('invoices.read'), await frontendToken('invoices.read')];
      const [fromFirst, fromSecond] = [await asFrontend(exchangeOf(first)), await asFrontend(exchangeOf(second))];
      expect((await revokeOwn(first)).status).to.equal(200);
      expect(await active(fromFirst.body.access_token)).to.equal(false);
      expect(await active(fromSecond.body.access_token)).to.equal(true);
    });

    it('bounds a chain of exchanges: eight in turn, then invalid_grant', async function () {
      let subjectToken = await frontendToken('invoices.read');
      for (let round = 1; round <= 9; round += 1) {
        const { status, body } = await asFrontend({ subject_token: subjectToken, subject_token_type: ACCESS_TOKEN });
        if (round === 9) {
          expect(status, JSON.stringify(body)).to.equal(400);
          expect(body.error).to.equal('invalid_grant');
          expect(body.error_description).to.contain('exchanged from 8 tokens in turn');
          return;
        }
        expect(status, `exchange ${round}: ${JSON.stringify(body)}`).to.equal(200);
        subjectToken = body.access_token;
      }
    });

    it('asks for what the subject token holds when no scope is given, and issues an access token when asked for one', async function () {
      for (const requested of [{}, { requested_token_type: ACCESS_TOKEN }] as Record<string, string>[]) {
        const subjectToken = await frontendToken('invoices.read');
        const { status, body } = await asFrontend({
          subject_token: subjectToken,
          subject_token_type: ACCESS_TOKEN,
          ...requested,
        });
        expect(status, JSON.stringify(body)).to.equal(200);
        expect(body.scope).to.equal('invoices.read');
        expect(body.issued_token_type).to.equal(ACCESS_TOKEN);
        expect(body).not.to.have.property('refresh_token');
      }
    });

    it("refuses a scope beyond the subject token's scopes with invalid_grant", async function () {
      const subjectToken = await frontendToken('invoices.read');
      const { status, body } = await asFrontend({
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN,
        scope: 'invoices.read invoices.write',
      });
      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_grant');
      expect(body.error_description).to.match(/exceeds the subject token's scopes/);
    });

    it('refuses authorization details the subject token does not carry (RFC 9396 §7) with invalid_authorization_details', async function () {
      const subjectToken = await frontendToken('invoices.read');
      const { status, body } = await asFrontend({
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN,
        scope: 'invoices.read',
        resource: API,
        authorization_details: JSON.stringify([{ type: INVOICES, actions: ['pay'], amount: '1000000' }]),
      });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_authorization_details');
      expect(body.error_description).to.contain('the subject token');
    });

    it('refuses an unknown token, and a token of another tenant, with invalid_grant', async function () {
      const unknown = await exchange({ subject_token: 'not-a-token-of-ours', subject_token_type: ACCESS_TOKEN });
      expect(unknown.status).to.equal(400);
      expect(unknown.body.error).to.equal('invalid_grant');
      const otherSecret = await confidentialClient(server, 'other-app', { scopes: ['invoices.read'] }, 'tenant-x');
      const elsewhere = await clientToken(
        server,
        'other-app',
        otherSecret,
        { scope: 'invoices.read' },
        { 'X-Tenant-Id': 'tenant-x' },
      );
      expect(elsewhere).to.be.a('string');
      const crossTenant = await exchange({ subject_token: elsewhere, subject_token_type: ACCESS_TOKEN });
      expect(crossTenant.status).to.equal(400);
      expect(crossTenant.body.error).to.equal('invalid_grant');
    });
  });

  describe('what is issued, and for which target (issue 23: RFC 8693 §2.2.2)', function () {
    const refusedTypes: Array<[string, RegExp]> = [
      ['urn:ietf:params:oauth:token-type:refresh_token', /never issues a refresh token/],
      ['urn:ietf:params:oauth:token-type:id_token', /only at sign-in/],
      ['urn:ietf:params:oauth:token-type:jwt', /opaque/],
      ['urn:ietf:params:oauth:token-type:saml2', /not a token type this server issues/],
      ['urn:example:custom', /not a token type this server issues/],
      // Names every object has: the description once quoted Object's own function for them.
      ['constructor', /not a token type this server issues \(supported/],
      ['__proto__', /not a token type this server issues \(supported/],
    ];
    for (const [type, why] of refusedTypes) {
      it(`refuses requested_token_type ${type} with invalid_request instead of an access token labelled as one`, async function () {
        const { status, body } = await asFrontend({
          subject_token: await frontendToken('invoices.read'),
          subject_token_type: ACCESS_TOKEN,
          requested_token_type: type,
        });
        expect(status, JSON.stringify(body)).to.equal(400);
        expect(body.error).to.equal('invalid_request');
        expect(body.error_description).to.match(why);
        expect(body).not.to.have.property('access_token');
      });
    }

    it('refuses an audience that is not the resource, or that nobody registered, with invalid_target: no token with the subject token scopes', async function () {
      const forms: Record<string, string>[] = [
        { audience: 'https://someone-else.example' },
        { audience: 'https://someone-else.example', resource: API },
        { audience: 'billing', resource: API },
        { audience: PROFILE, resource: API },
      ];
      for (const form of forms) {
        const { status, body } = await asFrontend({
          subject_token: await frontendToken(),
          subject_token_type: ACCESS_TOKEN,
          ...form,
        });
        expect(status, JSON.stringify(form)).to.equal(400);
        expect(body.error, JSON.stringify(form)).to.equal('invalid_target');
        expect(body).not.to.have.property('access_token');
      }
    });

    it("takes an audience alone as the resource: the token is for it, with the scopes within its type's ceiling", async function () {
      const { status, body } = await asFrontend({
        subject_token: await frontendToken(),
        subject_token_type: ACCESS_TOKEN,
        scope: 'invoices.read',
        audience: API,
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      const issued = await introspect(body.access_token);
      expect(issued.body).to.include({ active: true, scope: 'invoices.read', resource: API });
      expect(issued.body.resource_types).to.deep.equal([INVOICES]);
    });

    it('refuses a known resource none of whose scopes the subject token holds with invalid_target', async function () {
      for (const form of [
        { resource: PROFILE },
        { audience: PROFILE },
        { resource: PROFILE, scope: 'invoices.read' },
      ] as Record<string, string>[]) {
        const { status, body } = await asFrontend({
          subject_token: await frontendToken(),
          subject_token_type: ACCESS_TOKEN,
          ...form,
        });
        expect(status, JSON.stringify(form)).to.equal(400);
        expect(body.error, JSON.stringify(form)).to.equal('invalid_target');
        expect(body.error_description).to.contain(PROFILE);
      }
    });

    it("carries a client's own token to another resource type with only what the client may hold there, not its entitlements for the first (found 2026-11-30)", async function () {
      const LEDGER = 'urn:example:ledger';
      const LEDGER_API = 'https://ledger.example.test/';
      await confidentialClient(server, 'ledger-rs', { scopes: [] });
      const ledgerServer = (await server.admin('GET', '/clients/ledger-rs')).body;
      await server.admin('POST', '/resource-servers', {
        resourceIndicator: LEDGER_API,
        clientId: ledgerServer.id,
        typeUris: [LEDGER],
      });
      // The ledger's type shares a scope name with the invoices API's.
      await updateOauthData(server, (data) => {
        data.resource_types[LEDGER] = { scopes: ['invoices.read', 'invoices.write', 'ledger.read'] };
      });
      // Entitled to invoices.write for the invoices API alone.
      const secret = await confidentialClient(server, 'invoices-entitled', {
        scopes: ['invoices.read'],
        grantedResources: [{ type: INVOICES, scopes: ['invoices.write'] }],
      });
      const forInvoices = await clientToken(server, 'invoices-entitled', secret, {
        resource: API,
        scope: 'invoices.read invoices.write',
      });
      expect((await introspect(forInvoices)).body).to.include({ scope: 'invoices.read invoices.write' });
      const reaim = (form: Record<string, string>) =>
        exchange(
          { subject_token: forInvoices, subject_token_type: ACCESS_TOKEN, ...form },
          'invoices-entitled',
          secret,
        );

      const atLedger = await reaim({ resource: LEDGER_API });
      expect(atLedger.status, JSON.stringify(atLedger.body)).to.equal(200);
      expect(atLedger.body.scope).to.equal('invoices.read');
      const writeAtLedger = await reaim({ resource: LEDGER_API, scope: 'invoices.write' });
      expect(writeAtLedger.status, JSON.stringify(writeAtLedger.body)).to.equal(400);
      expect(writeAtLedger.body.error).to.equal('invalid_scope');
      // At the type it is entitled for, the token keeps both.
      const atInvoices = await reaim({ resource: API });
      expect(atInvoices.status, JSON.stringify(atInvoices.body)).to.equal(200);
      expect(atInvoices.body.scope).to.equal('invoices.read invoices.write');
    });

    it("never passes openid on from a client's own token (no user)", async function () {
      const secret = await confidentialClient(server, 'oidc-service', { scopes: ['openid', 'invoices.read'] });
      const own = await clientToken(server, 'oidc-service', secret, {});
      const { status, body } = await exchange(
        { subject_token: own, subject_token_type: ACCESS_TOKEN },
        'oidc-service',
        secret,
      );
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.scope).to.equal('invoices.read');
    });
  });

  describe('refusals before any token is looked at', function () {
    it('refuses a public client with a clear error', async function () {
      const publicClient = await registerPublicClient(server, REDIRECT_URI);
      const { status, body } = await postForm(server, '/token', {
        grant_type: EXCHANGE,
        client_id: publicClient.clientId,
        subject_token: await frontendToken(),
        subject_token_type: ACCESS_TOKEN,
      });
      expect(status).to.equal(400);
      expect(body.error).to.equal('unauthorized_client');
      expect(body.error_description).to.match(/confidential client/);
    });

    it('requires subject_token and subject_token_type (invalid_request)', async function () {
      const noToken = await exchange({ subject_token_type: ACCESS_TOKEN });
      expect(noToken.status).to.equal(400);
      expect(noToken.body).to.include({ error: 'invalid_request' });
      expect(noToken.body.error_description).to.match(/subject_token/);
      const noType = await exchange({ subject_token: 'x' });
      expect(noType.status).to.equal(400);
      expect(noType.body).to.include({ error: 'invalid_request' });
      expect(noType.body.error_description).to.match(/subject_token_type/);
    });

    it('requires actor_token and actor_token_type together, of a supported type (invalid_request)', async function () {
      const subject = await frontendToken();
      const forms: Record<string, string>[] = [
        { actor_token: subject },
        { actor_token_type: ACCESS_TOKEN },
        { actor_token: subject, actor_token_type: 'urn:ietf:params:oauth:token-type:saml2' },
      ];
      for (const form of forms) {
        const { status, body } = await exchange({ subject_token: subject, subject_token_type: ACCESS_TOKEN, ...form });
        expect(status, JSON.stringify(form)).to.equal(400);
        expect(body.error).to.equal('invalid_request');
        expect(body.error_description).to.match(/actor_token/);
      }
    });

    for (const type of ['refresh_token', 'saml1', 'saml2', 'jwt']) {
      it(`refuses subject_token_type ${type} (invalid_request)`, async function () {
        const { status, body } = await exchange({
          subject_token: await frontendToken(),
          subject_token_type: `urn:ietf:params:oauth:token-type:${type}`,
        });
        expect(status).to.equal(400);
        expect(body.error).to.equal('invalid_request');
        expect(body.error_description).to.match(/not supported/);
      });
    }
  });

  describe('actors: delegation (RFC 8693 §4.1, §4.4)', function () {
    const billingToken = () => clientToken(server, 'billing', exchangerSecret, { scope: 'invoices.read' });
    /** alice's token with billing acting for her (an act claim). */
    const delegatedToken = async () =>
      (
        await exchange({
          subject_token: await userAccessToken(),
          subject_token_type: ACCESS_TOKEN,
          scope: 'profile',
          actor_token: await billingToken(),
          actor_token_type: ACCESS_TOKEN,
        })
      ).body.access_token as string;

    it('issues a token that says who acts for the subject (act), shown at introspection', async function () {
      const { status, body } = await exchange({
        subject_token: await userAccessToken(),
        subject_token_type: ACCESS_TOKEN,
        scope: 'profile',
        actor_token: await billingToken(),
        actor_token_type: ACCESS_TOKEN,
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      const issued = await introspect(body.access_token);
      expect(issued.body).to.include({ active: true, sub: 'alice', scope: 'profile' });
      expect(issued.body.act).to.deep.equal({ sub: 'billing', client_id: 'billing', iss: server.config.issuer });
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect(entry.policyInput.actor_token).to.include({ client_id: 'billing', active: true });
    });

    it('ends a delegated token with its actor token, and lives no longer than it (found 2026-11-29: it outlived it)', async function () {
      const actorToken = await clientToken(server, 'billing', exchangerSecret, { scope: 'invoices.read' });
      const { status, body } = await exchange({
        subject_token: await userAccessToken(),
        subject_token_type: ACCESS_TOKEN,
        scope: 'profile',
        actor_token: actorToken,
        actor_token_type: ACCESS_TOKEN,
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      const actorExp = (await introspect(actorToken)).body.exp;
      expect((await introspect(body.access_token)).body.exp).to.be.at.most(actorExp);
      const revoked = await postForm(
        server,
        '/revoke',
        { token: actorToken },
        { Authorization: basic('billing', exchangerSecret) },
      );
      expect(revoked.status).to.equal(200);
      expect((await introspect(body.access_token)).body).to.deep.equal({ active: false });
    });

    it('nests the earlier actor when a delegated token is exchanged again', async function () {
      const delegated = await delegatedToken();
      const { status, body } = await exchange({
        subject_token: delegated,
        subject_token_type: ACCESS_TOKEN,
        scope: 'profile',
        actor_token: await billingToken(),
        actor_token_type: ACCESS_TOKEN,
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      const issued = await introspect(body.access_token);
      expect(issued.body.sub).to.equal('alice');
      const billingActs = { sub: 'billing', client_id: 'billing', iss: server.config.issuer };
      expect(issued.body.act).to.deep.equal({ ...billingActs, act: billingActs });
    });

    it('keeps the actor when a delegated token is exchanged again without an actor token: it never becomes a plain token of its user (found 2026-11-30)', async function () {
      const delegated = await delegatedToken();
      const { status, body } = await exchange({
        subject_token: delegated,
        subject_token_type: ACCESS_TOKEN,
        scope: 'profile',
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      const issued = await introspect(body.access_token);
      expect(issued.body.sub).to.equal('alice');
      // Was: no act at all, so a resource server saw alice herself.
      expect(issued.body.act).to.deep.equal({ sub: 'billing', client_id: 'billing', iss: server.config.issuer });
    });

    it("honours the subject token's may_act: the named party may act, another may not", async function () {
      const allowed = await exchange({
        subject_token: await idToken({ ...validIdClaims(), may_act: { sub: 'billing' } }),
        subject_token_type: ID_TOKEN,
        scope: 'invoices.read',
        actor_token: await billingToken(),
        actor_token_type: ACCESS_TOKEN,
      });
      expect(allowed.status, JSON.stringify(allowed.body)).to.equal(200);
      expect((await introspect(allowed.body.access_token)).body.act).to.include({ sub: 'billing' });
      const refused = await exchange({
        subject_token: await idToken({ ...validIdClaims(), may_act: { sub: 'someone-else' } }),
        subject_token_type: ID_TOKEN,
        scope: 'invoices.read',
        actor_token: await billingToken(),
        actor_token_type: ACCESS_TOKEN,
      });
      expect(refused.status).to.equal(400);
      expect(refused.body.error).to.equal('invalid_grant');
      expect(refused.body.error_description).to.match(/may_act/);
    });

    it('refuses an actor token that is not active (invalid_grant)', async function () {
      const { status, body } = await asFrontend({
        subject_token: await frontendToken(),
        subject_token_type: ACCESS_TOKEN,
        actor_token: 'no-such-token',
        actor_token_type: ACCESS_TOKEN,
      });
      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_grant');
      expect(body.error_description).to.match(/actor token/);
    });
  });

  describe('an ID token of an external issuer as subject token', function () {
    it('refuses authorization details on an ID token, which carries none: no user approved any (found 2026-11-30: any were echoed)', async function () {
      const { status, body } = await exchange({
        subject_token: await idToken(validIdClaims()),
        subject_token_type: ID_TOKEN,
        scope: 'invoices.read',
        resource: API,
        authorization_details: JSON.stringify([{ type: INVOICES, actions: ['pay'], amount: '999999' }]),
      });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_authorization_details');
      expect(body.error_description).to.contain('ID token');
    });

    it("accepts an ID token of a trusted issuer verified against its JWKS: the subject is its sub, the scopes the client's", async function () {
      const { status, body } = await exchange({
        subject_token: await idToken(validIdClaims()),
        subject_token_type: ID_TOKEN,
        scope: 'invoices.read',
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body).to.include({ scope: 'invoices.read', issued_token_type: ACCESS_TOKEN });
      expect(body).not.to.have.property('refresh_token');
      const issued = await introspect(body.access_token);
      expect(issued.body).to.include({ active: true, sub: 'carol', client_id: 'billing' });
    });

    it('accepts an ID token issued to an audience trusted_issuers maps to the client asking, and refuses it to another client (found 2026-11-30)', async function () {
      await updateOauthData(server, (data) => {
        data.trusted_issuers[issuer].audiences = { 'billing-at-the-idp': ['billing'] };
      });
      try {
        const form = async () => ({
          subject_token: await idToken({ ...validIdClaims(), aud: 'billing-at-the-idp' }),
          subject_token_type: ID_TOKEN,
          scope: 'invoices.read',
        });
        const own = await exchange(await form());
        expect(own.status, JSON.stringify(own.body)).to.equal(200);
        const another = await asFrontend(await form());
        expect(another.status, JSON.stringify(another.body)).to.equal(400);
        expect(another.body.error).to.equal('invalid_grant');
        expect(another.body).not.to.have.property('access_token');
      } finally {
        await updateOauthData(server, (data) => {
          delete data.trusted_issuers[issuer].audiences;
        });
      }
    });

    it("accepts an ID token issued to an audience trusted_issuers lists for its issuer (the client's id there)", async function () {
      await updateOauthData(server, (data) => {
        data.trusted_issuers[issuer].audiences = ['billing-at-the-idp'];
      });
      try {
        const { status, body } = await exchange({
          subject_token: await idToken({ ...validIdClaims(), aud: 'billing-at-the-idp' }),
          subject_token_type: ID_TOKEN,
          scope: 'invoices.read',
        });
        expect(status, JSON.stringify(body)).to.equal(200);
      } finally {
        await updateOauthData(server, (data) => {
          delete data.trusted_issuers[issuer].audiences;
        });
      }
    });

    // Found 2026-11-29: a trusted issuer's ID token naming a local user's sub made a token of that user.
    it('refuses an ID token whose sub is a local user who signs in through another identity provider', async function () {
      expect(await userAccessToken(), 'alice signs in through the dev IdP').to.be.a('string');
      const { status, body } = await exchange({
        subject_token: await idToken({ ...validIdClaims(), sub: 'alice' }),
        subject_token_type: ID_TOKEN,
        scope: 'invoices.read',
      });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body).to.include({ error: 'invalid_grant' });
      expect(body.error_description).to.contain('signs in through another identity provider');
    });

    // Found 2026-11-29: a token exchanged for a sub no user had yet stood for whoever signed in with it later.
    it('ends a token exchanged for a sub no user had, once a user of that sub signs in through another provider', async function () {
      const { status, body } = await exchange({
        subject_token: await idToken({ ...validIdClaims(), sub: 'dave' }),
        subject_token_type: ID_TOKEN,
        scope: 'invoices.read',
      });
      expect(status, JSON.stringify(body)).to.equal(200);
      expect((await introspect(body.access_token)).body).to.include({ active: true, sub: 'dave' });
      const dave = await server.admin('POST', '/subjects', { subjectId: 'dave', identityProviderId: idp.id });
      expect(dave.status, JSON.stringify(dave.body)).to.equal(201);
      expect((await introspect(body.access_token)).body).to.deep.equal({ active: false });
    });

    it("accepts an ID token of a local user's own provider, its issuer spelled as sign-in compares it (trailing slash)", async function () {
      const provider = await server.admin('POST', '/identity-providers', {
        issuer: `${issuer}/`,
        idpId: 'external-spelled',
        clientId: 'billing-at-the-idp',
      });
      expect(provider.status, JSON.stringify(provider.body)).to.equal(201);
      const erin = await server.admin('POST', '/subjects', { subjectId: 'erin', identityProviderId: provider.body.id });
      expect(erin.status, JSON.stringify(erin.body)).to.equal(201);
      const { status, body } = await exchange({
        subject_token: await idToken({ ...validIdClaims(), sub: 'erin' }),
        subject_token_type: ID_TOKEN,
        scope: 'invoices.read',
      });
      expect(status, JSON.stringify(body)).to.equal(200);
    });

    const failures: Array<[string, () => Promise<string>, RegExp]> = [
      ['missing iss', () => idToken({ ...validIdClaims(), iss: undefined }), /missing the iss claim/],
      ['missing sub', () => idToken({ ...validIdClaims(), sub: undefined }), /missing the sub claim/],
      ['expired', () => idToken({ ...validIdClaims(), exp: Math.floor(Date.now() / 1000) - 60 }), /expired/],
      [
        'a bad signature',
        async () => idToken(validIdClaims(), (await generateKeyPair('RS256')).privateKey),
        /signature verification failed/,
      ],
      [
        'an unknown kid',
        async () => idToken(validIdClaims(), (await generateKeyPair('RS256')).privateKey, 'other-key'),
        /signature verification failed/,
      ],
      [
        'an unreachable JWKS',
        () => idToken({ ...validIdClaims(), iss: unreachableIssuer }),
        /unable to verify the subject token's issuer/,
      ],
      [
        'an untrusted issuer',
        () => idToken({ ...validIdClaims(), iss: 'https://untrusted.example' }),
        /^untrusted_token_issuer/,
      ],
      ['a malformed token', async () => 'not.a.jwt', /not a signed JWT/],
      [
        "another client's audience",
        () => idToken({ ...validIdClaims(), aud: 'some-other-rp' }),
        /not issued to this client/,
      ],
      ['no audience', () => idToken({ ...validIdClaims(), aud: undefined }), /not issued to this client/],
      [
        "an authorized party that is another client's",
        () => idToken({ ...validIdClaims(), aud: ['billing', 'some-other-rp'], azp: 'some-other-rp' }),
        /not issued to this client/,
      ],
      [
        "the issuer's access token (typ at+jwt)",
        () =>
          new SignJWT({ ...validIdClaims(), aud: 'billing' })
            .setProtectedHeader({ alg: 'RS256', kid: 'idp-key', typ: 'at+jwt' })
            .sign(signingKey),
        /not an ID token/,
      ],
      [
        "the issuer's logout token (events)",
        () => idToken({ ...validIdClaims(), events: { 'http://schemas.openid.net/event/backchannel-logout': {} } }),
        /not an ID token/,
      ],
    ];
    for (const [what, token, description] of failures) {
      it(`refuses an ID token with ${what} (invalid_grant)`, async function () {
        const { status, body } = await exchange({ subject_token: await token(), subject_token_type: ID_TOKEN });
        expect(status, JSON.stringify(body)).to.equal(400);
        expect(body.error).to.equal('invalid_grant');
        expect(body.error_description).to.match(description);
      });
    }
  });
});

describe('POST /token: token exchange of an expired access token', function () {
  let server: TestServer;
  before(async function () {
    server = await readyServer({ ACCESS_TOKEN_TTL_SECONDS: '1' });
  });
  after(async function () {
    await server?.close();
  });

  it('refuses an expired subject token with invalid_grant', async function () {
    const secret = await confidentialClient(server, 'svc', { scopes: ['read'] });
    const subjectToken = await clientToken(server, 'svc', secret, { scope: 'read' });
    const exchange = () =>
      postForm(
        server,
        '/token',
        { grant_type: EXCHANGE, subject_token: subjectToken, subject_token_type: ACCESS_TOKEN },
        { Authorization: basic('svc', secret) },
      );
    // Exchanged while it lives (this request may itself come after its one second: then it is refused already).
    const first = await exchange();
    if (first.status !== 200) expect(first.body.error).to.equal('invalid_grant');
    // Its end is the server's clock passing `exp`: ask again until it says so, rather than sleep past it.
    let refused: Awaited<ReturnType<typeof exchange>> | undefined;
    await eventually(async () => {
      const answer = await exchange();
      if (answer.status === 200) return false;
      refused = answer;
      return true;
    }, 10_000);
    expect(refused?.status).to.equal(400);
    expect(refused?.body.error).to.equal('invalid_grant');
    expect(refused?.body.error_description).to.match(/not an active access token/);
  });
});
