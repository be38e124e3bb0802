import { expect } from 'chai';
import { TestPki, type IssuedCertificate } from '../support/certificates.js';
import { startRegisteredDevIdp, type RegisteredDevIdp, type TestClient } from '../support/dev-idp.js';
import { DpopKey } from '../support/dpop.js';
import { basic, clientWithToken, confidentialClient, eventually, postForm } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { ACCESS_TOKEN_FORMAT, api, UMA_GRANT, umaPublicClient, userToken } from '../uma/support.js';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const HEADER = 'x-ssl-client-cert';
const WEB_CALLBACK = 'http://127.0.0.1:1/mtls-web/cb';
const SPA_CALLBACK = 'http://127.0.0.1:1/mtls-spa/cb';

/**
 * RFC 8705 §3 for Arbiter's own grants, token exchange (RFC 8693) and the UMA grant: a client
 * registered for certificate-bound tokens gets tokens bound to the certificate it came with, as
 * from client_credentials and authorization_code; a certificate-bound subject or claim token is
 * honoured with that certificate alone; UserInfo and introspection then hold the new token to it.
 * Certificates come from a trusted proxy's header (the test is the proxy).
 */
describe('RFC 8705 certificate-bound tokens from token exchange and the UMA grant', function () {
  let pki: TestPki;
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let certificate: IssuedCertificate;
  let other: IssuedCertificate;
  let web: TestClient;
  let rsToken: string;
  let pat: string;
  let photo: string;

  before(async function () {
    pki = await TestPki.create();
    certificate = await pki.issue('web', '/CN=web.example', { san: 'DNS:web.example' });
    other = await pki.issue('other', '/CN=other.example', { san: 'DNS:other.example' });
    // Its own server: a setting of its own (the proxy's header).
    server = await readyServer({
      MTLS_CERTIFICATE_HEADER: HEADER,
      TRUSTED_PROXIES: '127.0.0.1,::1',
      TLS_CLIENT_CA_FILE: pki.caFile,
    });
    idp = await startRegisteredDevIdp(server);
    // A client that authenticates with its secret and is registered for certificate-bound tokens.
    const secret = await confidentialClient(server, 'mtls-web', {
      redirectUris: [WEB_CALLBACK],
      scopes: ['openid', 'profile'],
      tlsClientCertificateBoundAccessTokens: true,
    });
    web = { clientId: 'mtls-web', redirectUri: WEB_CALLBACK, secret };
    ({ token: rsToken } = await clientWithToken(server, 'mtls-rs', ['introspection']));
    const spa = await umaPublicClient(server, 'mtls-spa', SPA_CALLBACK);
    pat = await userToken(server, spa, 'alice', { resource: 'urn:as:introspect', scope: 'openid uma_protection' });
    const resource = await api(server, 'POST', '/resource_registration/resource', pat, {
      name: 'Beach',
      resource_scopes: ['view'],
    });
    expect(resource.status, JSON.stringify(resource.body)).to.equal(201);
    photo = resource.body._id;
  });
  after(async function () {
    await idp?.close();
    await server?.close();
    pki?.close();
  });

  const forwarded = (presented?: IssuedCertificate): Record<string, string> =>
    presented ? { [HEADER]: encodeURIComponent(presented.cert) } : {};
  /** alice's token at mtls-web, bound to `certificate` (the code is redeemed with it). */
  const aliceToken = () =>
    userToken(server, web, 'alice', { scope: 'openid profile' }, async () => forwarded(certificate));
  const atWeb = (form: Record<string, string>, presented?: IssuedCertificate) =>
    postForm(server, '/token', form, { Authorization: basic(web.clientId, web.secret!), ...forwarded(presented) });
  const introspect = (token: string) =>
    postForm(server, '/introspect', { token }, { Authorization: `Bearer ${rsToken}` });
  const userinfo = async (token: string, presented?: IssuedCertificate) =>
    (await server.request('/userinfo', { headers: { Authorization: `Bearer ${token}`, ...forwarded(presented) } }))
      .status;

  describe('token exchange', function () {
    const exchange = (subjectToken: string, presented?: IssuedCertificate) =>
      atWeb(
        {
          grant_type: EXCHANGE,
          subject_token: subjectToken,
          subject_token_type: ACCESS_TOKEN,
          scope: 'openid profile',
        },
        presented,
      );

    it('binds the exchanged token to the certificate, which UserInfo and introspection then hold it to', async function () {
      const subjectToken = await aliceToken();
      const { status, body } = await exchange(subjectToken, certificate);
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.token_type).to.equal('Bearer');
      const introspected = await introspect(body.access_token);
      expect(introspected.body).to.include({ active: true, sub: 'alice', client_id: 'mtls-web' });
      expect(introspected.body.cnf).to.deep.equal({ 'x5t#S256': certificate.thumbprint });
      expect(await userinfo(body.access_token, certificate), 'with its certificate').to.equal(200);
      expect(await userinfo(body.access_token), 'without a certificate').to.equal(401);
      expect(await userinfo(body.access_token, other), 'with another certificate').to.equal(401);
    });

    it('refuses the exchange without the certificate, or with another one, with invalid_grant', async function () {
      const subjectToken = await aliceToken();
      for (const [presented, why, description] of [
        [undefined, 'no certificate', /did not present/],
        [other, 'another certificate', /not the one/],
      ] as const) {
        const { status, body } = await exchange(subjectToken, presented);
        expect(status, why).to.equal(400);
        expect(body.error, why).to.equal('invalid_grant');
        expect(body.error_description, why).to.match(description);
        expect(body, why).not.to.have.property('access_token');
      }
    });

    it('keeps a certificate-bound subject token bound through the exchange, whatever the client is registered for now (found 2026-11-30)', async function () {
      const secret = await confidentialClient(server, 'mtls-was-bound', {
        scopes: ['profile'],
        tlsClientCertificateBoundAccessTokens: true,
      });
      const asClient = (form: Record<string, string>) =>
        postForm(server, '/token', form, { Authorization: basic('mtls-was-bound', secret), ...forwarded(certificate) });
      const bound = await asClient({ grant_type: 'client_credentials', scope: 'profile' });
      expect(bound.status, JSON.stringify(bound.body)).to.equal(200);
      expect((await introspect(bound.body.access_token)).body.cnf).to.deep.equal({
        'x5t#S256': certificate.thumbprint,
      });
      // An operator no longer asks certificate-bound tokens of the client: its bound ones stay bound.
      const record = (await server.admin('GET', '/clients/mtls-was-bound')).body;
      const { id: _id, createdAt: _created, updatedAt: _updated, ...fields } = record;
      const replaced = await server.admin('PUT', '/clients/mtls-was-bound', {
        ...fields,
        tlsClientCertificateBoundAccessTokens: false,
      });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
      const exchanged = await asClient({
        grant_type: EXCHANGE,
        subject_token: bound.body.access_token,
        subject_token_type: ACCESS_TOKEN,
        scope: 'profile',
      });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      // Was: a Bearer token, usable without the certificate.
      expect((await introspect(exchanged.body.access_token)).body.cnf).to.deep.equal({
        'x5t#S256': certificate.thumbprint,
      });
    });

    it("shows the policy the subject token's certificate binding as input.subject_token.cnf_x5t_s256", async function () {
      const rules = (await server.admin('GET', '/policy-rules')).body as any[];
      const rule = rules.find((candidate) => candidate.path.endsWith('token_exchange/token_exchange.rego'));
      const { id, createdAt: _created, updatedAt: _updated, tenantId: _tenant, ...original } = rule;
      const confidential =
        'decision := lib.deny("unauthorized_client", "token exchange requires a confidential client") if {';
      expect(original.content).to.include(confidential);
      // A rule that refuses to exchange certificate-bound tokens, naming the thumbprint it was shown.
      const refusing = original.content.replace(
        confidential,
        [
          'decision := lib.deny("invalid_grant", concat("", ["certificate-bound: ", input.subject_token.cnf_x5t_s256])) if {',
          '\tis_string(input.subject_token.cnf_x5t_s256)',
          `} else := ${confidential.slice('decision := '.length)}`,
        ].join('\n'),
      );
      const replaced = await server.admin('PUT', `/policy-rules/${id}`, { ...original, content: refusing });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
      try {
        const subjectToken = await aliceToken();
        await eventually(async () => (await exchange(subjectToken, certificate)).status === 400);
        const { body } = await exchange(subjectToken, certificate);
        expect(body.error).to.equal('invalid_grant');
        expect(body.error_description).to.equal(`certificate-bound: ${certificate.thumbprint}`);
      } finally {
        await server.admin('PUT', `/policy-rules/${id}`, original);
      }
      // The original rule back, the same exchange is allowed again.
      const subjectToken = await aliceToken();
      await eventually(async () => (await exchange(subjectToken, certificate)).status === 200);
    });
  });

  describe('the UMA grant', function () {
    const redeem = async (claimToken: string, presented?: IssuedCertificate) => {
      const permission = await api(server, 'POST', '/permission', pat, {
        resource_id: photo,
        resource_scopes: ['view'],
      });
      return atWeb(
        {
          grant_type: UMA_GRANT,
          ticket: permission.body.ticket,
          claim_token: claimToken,
          claim_token_format: ACCESS_TOKEN_FORMAT,
        },
        presented,
      );
    };

    it('binds the RPT to the certificate the client came with', async function () {
      const { status, body } = await redeem(await aliceToken(), certificate);
      expect(status, JSON.stringify(body)).to.equal(200);
      const introspected = await postForm(
        server,
        '/introspect',
        { token: body.access_token },
        { Authorization: `Bearer ${pat}` },
      );
      expect(introspected.body.active, JSON.stringify(introspected.body)).to.equal(true);
      expect(introspected.body.cnf).to.deep.equal({ 'x5t#S256': certificate.thumbprint });
    });

    it('refuses a DPoP proof beside the certificate before it redeems the ticket, which then still works (found 2026-11-30: it was spent)', async function () {
      const permission = await api(server, 'POST', '/permission', pat, {
        resource_id: photo,
        resource_scopes: ['view'],
      });
      const claimToken = await aliceToken();
      const form = {
        grant_type: UMA_GRANT,
        ticket: permission.body.ticket,
        claim_token: claimToken,
        claim_token_format: ACCESS_TOKEN_FORMAT,
      };
      const proof = await (await DpopKey.generate()).proof('POST', `${server.config.issuer}/token`);
      const both = await postForm(server, '/token', form, {
        Authorization: basic(web.clientId, web.secret!),
        ...forwarded(certificate),
        DPoP: proof,
      });
      expect(both.status, JSON.stringify(both.body)).to.equal(400);
      expect(both.body).to.include({
        error: 'invalid_request',
        error_description: 'multiple proof-of-possession mechanisms are not allowed',
      });
      const { status, body } = await atWeb(form, certificate);
      expect(status, JSON.stringify(body)).to.equal(200);
    });

    it('refuses a certificate-bound claim token without its certificate', async function () {
      const { status, body } = await redeem(await aliceToken());
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_grant');
      expect(body.error_description).to.match(/did not present/);
    });
  });
});
