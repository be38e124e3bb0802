import { expect } from 'chai';
import * as openid from 'openid-client';
import { randomUUID } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { FetchUserAgent } from '../support/browser.js';
import { TestPki, type IssuedCertificate } from '../support/certificates.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { basic, confidentialClient, eventually, FORM, postForm } from '../support/oauth.js';
import { freePort, readyServer, withServer, type TestServer } from '../support/server.js';

interface Answer {
  status: number;
  body: any;
}

/** A request over TLS to `server`'s public listener, with a client certificate or none. */
function tlsRequest(
  server: TestServer,
  pki: TestPki,
  method: string,
  path: string,
  body: string | undefined,
  certificate: IssuedCertificate | undefined,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = httpsRequest(
      `${server.url}${path}`,
      {
        method,
        headers,
        ca: pki.caPem(),
        ...(certificate ? { cert: certificate.cert, key: certificate.key } : {}),
        // A connection of its own per call, so that each call presents its own certificate.
        agent: false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: response.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
        });
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/**
 * RFC 8705 mutual TLS on Arbiter's own TLS listener (TLS_CERT_FILE): real TLS connections with
 * client certificates made by a throwaway CA (openssl), tls_client_auth by subject DN,
 * self_signed_tls_client_auth by a certificate in the client's JWKS, certificate-bound access
 * tokens (`cnf.x5t#S256` at introspection, refused without their certificate).
 */
describe('RFC 8705 mutual TLS on the TLS listener', function () {
  let pki: Awaited<ReturnType<typeof TestPki.create>>;
  let server: TestServer;
  let client: IssuedCertificate;
  let other: IssuedCertificate;
  let selfSigned: IssuedCertificate;
  const dnClient = `mtls-dn-${randomUUID().slice(0, 8)}`;
  const selfSignedClient = `mtls-self-${randomUUID().slice(0, 8)}`;

  before(async function () {
    pki = await TestPki.create();
    client = await pki.issue('client', '/O=Arbiter Test/CN=mtls-client');
    other = await pki.issue('other', '/O=Arbiter Test/CN=someone-else');
    selfSigned = await pki.issue('self', '/CN=self-signed-client', { selfSigned: true });
    const port = await freePort();
    // Its own server: the public listener speaks TLS (with the admin surface on a plain listener of its own).
    server = await readyServer({
      PORT: String(port),
      ISSUER: `https://127.0.0.1:${port}`,
      ADMIN_PORT: '0',
      TLS_CERT_FILE: pki.server.certFile,
      TLS_KEY_FILE: pki.server.keyFile,
      TLS_CLIENT_CA_FILE: pki.caFile,
      // RFC 8705 §5: the same listener by another name (the server's certificate names both).
      MTLS_ENDPOINT_BASE_URL: `https://localhost:${port}`,
    });
    await created(
      server.admin('POST', '/clients', {
        clientId: dnClient,
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'tls_client_auth',
        tlsClientAuthSubjectDn: 'CN=mtls-client,O=Arbiter Test',
        tlsClientCertificateBoundAccessTokens: true,
        grantTypes: ['client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'],
        scopes: ['introspection'],
      }),
    );
    // The client introspects its own token, as the resource server it is registered as.
    const record = (await server.admin('GET', `/clients/${dnClient}`)).body;
    await created(
      server.admin('POST', '/resource-servers', {
        resourceIndicator: `https://${dnClient}.example/`,
        clientId: record.id,
      }),
    );
    const x5c = [selfSigned.cert.replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '')];
    const { X509Certificate } = await import('node:crypto');
    const jwk = new X509Certificate(selfSigned.cert).publicKey.export({ format: 'jwk' });
    await created(
      server.admin('POST', '/clients', {
        clientId: selfSignedClient,
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'self_signed_tls_client_auth',
        jwks: { keys: [{ ...jwk, x5c, use: 'sig' }] },
        scopes: ['introspection'],
      }),
    );
  });
  after(async function () {
    await server?.close();
    pki?.close();
  });

  /** A form POSTed over TLS to the public listener, with a client certificate or none. */
  function post(path: string, form: Record<string, string>, certificate?: IssuedCertificate, headers = {}) {
    return tlsCall('POST', path, new URLSearchParams(form).toString(), certificate, { ...FORM, ...headers });
  }

  function tlsCall(
    method: string,
    path: string,
    body: string | undefined,
    certificate: IssuedCertificate | undefined,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    return tlsRequest(server, pki, method, path, body, certificate, headers);
  }

  const tokenOf = (clientId: string, certificate?: IssuedCertificate) =>
    post('/token', { grant_type: 'client_credentials', client_id: clientId, scope: 'introspection' }, certificate);

  it('advertises both methods at every endpoint that authenticates clients, certificate-bound tokens and the mTLS aliases in discovery', async function () {
    const { body } = await tlsCall('GET', '/.well-known/openid-configuration', undefined, undefined);
    const mtlsMethods = ['tls_client_auth', 'self_signed_tls_client_auth'];
    expect(body.token_endpoint_auth_methods_supported).to.include.members(mtlsMethods);
    expect(body.revocation_endpoint_auth_methods_supported).to.deep.equal(body.token_endpoint_auth_methods_supported);
    expect(body.introspection_endpoint_auth_methods_supported).to.include.members([...mtlsMethods, 'Bearer']);
    expect(body.introspection_endpoint_auth_methods_supported).not.to.include('none');
    expect(body.tls_client_certificate_bound_access_tokens).to.equal(true);
    expect(body.issuer).to.equal(server.config.issuer);
    const alias = server.config.issuer.replace('127.0.0.1', 'localhost');
    expect(body.mtls_endpoint_aliases).to.deep.equal({
      token_endpoint: `${alias}/token`,
      revocation_endpoint: `${alias}/revoke`,
      introspection_endpoint: `${alias}/introspect`,
      userinfo_endpoint: `${alias}/userinfo`,
      pushed_authorization_request_endpoint: `${alias}/par`,
      device_authorization_endpoint: `${alias}/device/auth`,
    });
  });

  it('authenticates a client by certificate at /revoke, as discovery says', async function () {
    const issued = await tokenOf(dnClient, client);
    const revoked = await post('/revoke', { token: issued.body.access_token, client_id: dnClient }, client);
    expect(revoked.status, JSON.stringify(revoked.body)).to.equal(200);
    const refused = await post('/revoke', { token: issued.body.access_token, client_id: dnClient }, other);
    expect(refused.status).to.equal(401);
    expect(refused.body.error).to.equal('invalid_client');
  });

  it('authenticates a tls_client_auth client by the subject DN of a certificate its CA issued, and binds its token to it', async function () {
    const issued = await tokenOf(dnClient, client);
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    expect(issued.body.token_type).to.equal('Bearer');

    const own = { Authorization: `Bearer ${issued.body.access_token}` };
    const introspected = await post('/introspect', { token: issued.body.access_token }, client, own);
    expect(introspected.status, JSON.stringify(introspected.body)).to.equal(200);
    expect(introspected.body.active).to.equal(true);
    expect(introspected.body.cnf).to.deep.equal({ 'x5t#S256': client.thumbprint });
  });

  it('refuses a tls_client_auth client without a certificate, with another subject, or with one no trusted CA issued', async function () {
    for (const [certificate, why] of [
      [undefined, 'no certificate'],
      [other, 'another subject'],
      [selfSigned, 'not issued by the CA'],
    ] as const) {
      const { status, body } = await tokenOf(dnClient, certificate);
      expect(status, why).to.equal(401);
      expect(body.error, why).to.equal('invalid_client');
    }
  });

  it('refuses a certificate-bound token presented without its certificate or with another one', async function () {
    const issued = await tokenOf(dnClient, client);
    const own = { Authorization: `Bearer ${issued.body.access_token}` };
    for (const [certificate, why] of [
      [undefined, 'no certificate'],
      [other, 'another certificate'],
    ] as const) {
      const { status, body } = await post('/introspect', { token: issued.body.access_token }, certificate, own);
      expect(status, why).to.equal(401);
      expect(body.error, why).to.equal('invalid_token');
    }
  });

  it('authenticates a self_signed_tls_client_auth client by the certificate in its JWKS, and no other', async function () {
    const issued = await tokenOf(selfSignedClient, selfSigned);
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    const refused = await tokenOf(selfSignedClient, client);
    expect(refused.status).to.equal(401);
    expect(refused.body.error).to.equal('invalid_client');
  });

  /**
   * A fetch over this test's TLS (its CA trusted), presenting `certificate`: what a real client is
   * given as its customFetch to present a client certificate (RFC 8705). Each URL asked is noted,
   * and the media type of each answer.
   */
  function tlsFetch(certificate: IssuedCertificate | undefined, asked: string[], answered: string[] = []) {
    return (url: string, options: { method: string; headers: Record<string, string>; body?: unknown }) =>
      new Promise<Response>((resolve, reject) => {
        asked.push(url);
        const outgoing = httpsRequest(
          url,
          {
            method: options.method,
            headers: options.headers,
            ca: pki.caPem(),
            ...(certificate ? { cert: certificate.cert, key: certificate.key } : {}),
            agent: false,
          },
          (response) => {
            const chunks: Buffer[] = [];
            response.on('data', (chunk: Buffer) => chunks.push(chunk));
            response.on('end', () => {
              answered.push(response.headers['content-type'] ?? '');
              const headers = new Headers();
              for (const [name, value] of Object.entries(response.headers))
                if (typeof value === 'string') headers.set(name, value);
              resolve(new Response(Buffer.concat(chunks), { status: response.statusCode ?? 0, headers }));
            });
          },
        );
        outgoing.on('error', reject);
        outgoing.end(options.body === undefined ? undefined : String(options.body));
      });
  }

  it('serves oauth4webapi (as openid-client 6 drives it) as an mTLS client at the aliases: a bound token, JWT introspection, device authorization', async function () {
    const asked: string[] = [];
    const answered: string[] = [];
    const alias = server.config.issuer.replace('127.0.0.1', 'localhost');
    const configuration = await openid.discovery(
      new URL(server.config.issuer),
      dnClient,
      { use_mtls_endpoint_aliases: true, introspection_signed_response_alg: 'RS256' },
      openid.TlsClientAuth(),
      { [openid.customFetch]: tlsFetch(client, asked) },
    );
    configuration[openid.customFetch] = tlsFetch(client, asked, answered);

    const tokens = await openid.clientCredentialsGrant(configuration, { scope: 'introspection' });
    expect(tokens.token_type.toLowerCase()).to.equal('bearer');
    expect(asked.at(-1), 'the token request went to the alias').to.equal(`${alias}/token`);
    // RFC 9701: a signed introspection response, which openid-client verifies against the issuer's keys.
    const introspection = await openid.tokenIntrospection(configuration, tokens.access_token);
    expect(asked.at(-1)).to.equal(`${alias}/introspect`);
    expect(answered.at(-1)).to.match(/^application\/token-introspection\+jwt/);
    expect(introspection).to.include({ active: true, client_id: dnClient });
    expect(introspection.cnf).to.deep.equal({ 'x5t#S256': client.thumbprint });
    const started = await openid.initiateDeviceAuthorization(configuration, { scope: 'introspection' });
    expect(asked.at(-1)).to.equal(`${alias}/device/auth`);
    expect(started.user_code).to.be.a('string');
    const polled = await post(
      '/token',
      {
        grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
        device_code: started.device_code,
        client_id: dnClient,
      },
      client,
    );
    expect(polled.body.error, 'the device code is the client’s, waiting for its user').to.equal(
      'authorization_pending',
    );

    // Without its certificate, the same client is refused at the alias as anywhere.
    configuration[openid.customFetch] = tlsFetch(undefined, asked);
    const refused = await openid
      .clientCredentialsGrant(configuration, { scope: 'introspection' })
      .catch((error) => error);
    expect(refused).to.be.instanceOf(openid.ResponseBodyError);
    expect(refused.error).to.equal('invalid_client');
  });

  describe('clients registered through /register (RFC 7591)', function () {
    before(async function () {
      // updateOauthData's wait asks the public listener, which speaks TLS here: the first test waits instead.
      const entries = (await server.admin('GET', '/policy-data?bundledOnly=true')).body as any[];
      const data = JSON.parse(entries.find((entry) => entry.dataKey === 'oauth').payload);
      data.public_client_policy.enabled = true;
      data.public_client_policy.dcr.allowed_grant_types = ['authorization_code', 'refresh_token', 'client_credentials'];
      const saved = await server.admin('PUT', '/policy-data/by-key?dataKey=oauth', {
        dataKey: 'oauth',
        payload: JSON.stringify(data),
      });
      expect(saved.status, JSON.stringify(saved.body)).to.equal(200);
    });

    const register = async (metadata: Record<string, unknown>) =>
      tlsCall(
        'POST',
        '/register',
        JSON.stringify({
          redirect_uris: ['https://mtls-dcr.example/cb'],
          grant_types: ['client_credentials'],
          ...metadata,
        }),
        undefined,
        { 'Content-Type': 'application/json' },
      );
    /** A token of a registered client, for the scopes the registration granted it. */
    const registeredToken = (clientId: string, certificate?: IssuedCertificate) =>
      post('/token', { grant_type: 'client_credentials', client_id: clientId }, certificate);
    /** The registered client's token is bound to `certificate`: its introspection, by a client that holds it, says so. */
    const boundTo = async (token: string, certificate: IssuedCertificate) => {
      const holder = await tokenOf(dnClient, client);
      const introspected = await post('/introspect', { token }, client, {
        Authorization: `Bearer ${holder.body.access_token}`,
      });
      expect(introspected.body.active, JSON.stringify(introspected.body)).to.equal(true);
      expect(introspected.body.cnf).to.deep.equal({ 'x5t#S256': certificate.thumbprint });
    };
    /** The registered client gets a token bound to `holder`, and 401 invalid_client with each refused certificate. */
    const boundThenRefused = async (
      clientId: string,
      holder: IssuedCertificate,
      refusedWith: readonly (readonly [IssuedCertificate | undefined, string])[],
    ) => {
      const issued = await registeredToken(clientId, holder);
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      await boundTo(issued.body.access_token, holder);
      for (const [certificate, why] of refusedWith) {
        const refused = await registeredToken(clientId, certificate);
        expect(refused.status, why).to.equal(401);
        expect(refused.body.error, why).to.equal('invalid_client');
      }
    };

    it('registers a tls_client_auth client by subject DN: no secret, tokens bound to its certificate, refused without it or with another', async function () {
      let registered: Answer = { status: 0, body: undefined };
      await eventually(async () => {
        registered = await register({
          token_endpoint_auth_method: 'tls_client_auth',
          tls_client_auth_subject_dn: 'CN=mtls-client,O=Arbiter Test',
          tls_client_certificate_bound_access_tokens: true,
        });
        return registered.status === 201;
      });
      expect(registered.body).to.include({
        token_endpoint_auth_method: 'tls_client_auth',
        tls_client_auth_subject_dn: 'CN=mtls-client,O=Arbiter Test',
        tls_client_certificate_bound_access_tokens: true,
      });
      expect(registered.body).not.to.have.property('client_secret');
      const clientId = registered.body.client_id as string;
      await boundThenRefused(clientId, client, [
        [undefined, 'no certificate'],
        [other, 'another subject'],
        [selfSigned, 'not issued by the CA'],
      ]);
    });

    it('lets a registered client change its mTLS metadata with its registration access token (RFC 7592 §2.2)', async function () {
      let registered: Answer = { status: 0, body: undefined };
      // Run alone, this test is the one that waits for the policy data to reach the engine.
      await eventually(async () => {
        registered = await register({
          token_endpoint_auth_method: 'tls_client_auth',
          tls_client_auth_subject_dn: 'CN=mtls-client,O=Arbiter Test',
          tls_client_certificate_bound_access_tokens: true,
        });
        return registered.status === 201;
      });
      const { client_id: clientId, registration_access_token: accessToken } = registered.body;
      // A full replacement (§2.2): the new subject, and tls_client_certificate_bound_access_tokens omitted, so off.
      const updated = await tlsCall(
        'PUT',
        `/register/${clientId}`,
        JSON.stringify({
          client_id: clientId,
          redirect_uris: ['https://mtls-dcr.example/cb'],
          grant_types: ['client_credentials'],
          token_endpoint_auth_method: 'tls_client_auth',
          tls_client_auth_subject_dn: 'CN=someone-else,O=Arbiter Test',
        }),
        undefined,
        { 'Content-Type': 'application/json', Authorization: `Bearer ${accessToken}` },
      );
      expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
      expect(updated.body.tls_client_auth_subject_dn).to.equal('CN=someone-else,O=Arbiter Test');
      expect(updated.body).not.to.have.property('tls_client_certificate_bound_access_tokens');
      await eventually(async () => (await registeredToken(clientId, client)).status === 401);
      const refused = await registeredToken(clientId, client);
      expect(refused.body.error, 'the old subject').to.equal('invalid_client');
      const issued = await registeredToken(clientId, other);
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      // No longer certificate-bound: its introspection has no `cnf`.
      const holder = await tokenOf(dnClient, client);
      const introspected = await post('/introspect', { token: issued.body.access_token }, client, {
        Authorization: `Bearer ${holder.body.access_token}`,
      });
      expect(introspected.body.active, JSON.stringify(introspected.body)).to.equal(true);
      expect(introspected.body).not.to.have.property('cnf');
    });

    it('registers a self_signed_tls_client_auth client by the certificate in its jwks, and no other', async function () {
      const { X509Certificate } = await import('node:crypto');
      const jwk = new X509Certificate(selfSigned.cert).publicKey.export({ format: 'jwk' });
      const x5c = [selfSigned.cert.replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '')];
      const registered = await register({
        token_endpoint_auth_method: 'self_signed_tls_client_auth',
        jwks: { keys: [{ ...jwk, x5c, use: 'sig' }] },
        tls_client_certificate_bound_access_tokens: true,
      });
      expect(registered.status, JSON.stringify(registered.body)).to.equal(201);
      const clientId = registered.body.client_id as string;
      await boundThenRefused(clientId, selfSigned, [
        [undefined, 'no certificate'],
        [client, 'a certificate not in its jwks'],
      ]);
    });
  });

  it('keeps serving clients without certificates on the same listener', async function () {
    const secret = await confidentialClient(server, `plain-${randomUUID().slice(0, 8)}`, { scopes: ['introspection'] });
    const clientId = secret.replace(/-secret-value$/, '');
    const { status, body } = await post(
      '/token',
      { grant_type: 'client_credentials', scope: 'introspection' },
      undefined,
      { Authorization: basic(clientId, secret) },
    );
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.token_type).to.equal('Bearer');
  });
});

/**
 * RFC 8705 behind a TLS-terminating proxy (MTLS_CERTIFICATE_HEADER from TRUSTED_PROXIES): the
 * test is the proxy, forwarding certificates URL-encoded as nginx's `$ssl_client_escaped_cert`.
 * A user's access token bound to the certificate at /token is refused at UserInfo without it.
 */
describe('RFC 8705 mutual TLS through a trusted proxy’s certificate header', function () {
  const HEADER = 'x-ssl-client-cert';
  const REDIRECT_URI = 'https://mtls-rp.example.test/cb';
  let pki: TestPki;
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let client: IssuedCertificate;
  let other: IssuedCertificate;

  before(async function () {
    pki = await TestPki.create();
    client = await pki.issue('client', '/CN=rp.example', { san: 'DNS:rp.example' });
    other = await pki.issue('other', '/CN=other.example', { san: 'DNS:other.example' });
    // Its own server: a setting of its own (the proxy's header).
    server = await readyServer({
      MTLS_CERTIFICATE_HEADER: HEADER,
      TRUSTED_PROXIES: '127.0.0.1,::1',
      TLS_CLIENT_CA_FILE: pki.caFile,
    });
    idp = await startRegisteredDevIdp(server);
  });
  after(async function () {
    await idp?.close();
    await server?.close();
    pki?.close();
  });

  const forwarded = (certificate: IssuedCertificate) => ({ [HEADER]: encodeURIComponent(certificate.cert) });

  it('authenticates tls_client_auth by a SAN of the forwarded certificate', async function () {
    const clientId = `mtls-san-${randomUUID().slice(0, 8)}`;
    await created(
      server.admin('POST', '/clients', {
        clientId,
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'tls_client_auth',
        tlsClientAuthSanDns: 'rp.example',
        scopes: ['introspection'],
      }),
    );
    const form = { grant_type: 'client_credentials', client_id: clientId };
    expect((await postForm(server, '/token', form, forwarded(client))).status).to.equal(200);
    const refused = await postForm(server, '/token', form, forwarded(other));
    expect(refused.status).to.equal(401);
    expect(refused.body.error).to.equal('invalid_client');
  });

  it("binds a user's access token to the certificate at /token, and UserInfo refuses it without that certificate", async function () {
    const rp = { clientId: `mtls-rp-${randomUUID().slice(0, 8)}`, redirectUri: REDIRECT_URI };
    await created(
      server.admin('POST', '/clients', {
        clientId: rp.clientId,
        clientType: 'public',
        tokenEndpointAuthMethod: 'none',
        redirectUris: [REDIRECT_URI],
        scopes: ['openid', 'profile', 'email'],
        tlsClientCertificateBoundAccessTokens: true,
      }),
    );
    const request = await authorizationRequest(server, rp);
    const agent = new FetchUserAgent();
    const login = await agent.navigate(request.url, arrivingAt(REDIRECT_URI));
    const landed = await passDevIdpForms(agent, login, `mtls-${randomUUID().slice(0, 6)}`, arrivingAt(REDIRECT_URI));
    const code = landed.url.searchParams.get('code')!;

    const unbound = await redeemCode(server, rp, code, request.codeVerifier);
    expect(unbound.status, 'a code of a certificate-bound client needs the certificate').to.equal(400);
    expect(unbound.body.error).to.equal('invalid_grant');
    const tokens = await redeemCode(server, rp, code, request.codeVerifier, forwarded(client));
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    const userinfo = (headers: Record<string, string>) =>
      server.request('/userinfo', { headers: { Authorization: `Bearer ${tokens.body.access_token}`, ...headers } });
    expect((await userinfo(forwarded(client))).status).to.equal(200);
    for (const [headers, why] of [
      [{}, 'no certificate'],
      [forwarded(other), 'another certificate'],
    ] as const) {
      const answer = await userinfo(headers);
      expect(answer.status, why).to.equal(401);
      expect(answer.headers.get('www-authenticate'), why).to.contain('invalid_token');
    }
  });

  it('holds a FAPI 2.0 client to mutual TLS as its authentication and its sender constraint, in place of private_key_jwt and DPoP', async function () {
    const clientId = `fapi-mtls-${randomUUID().slice(0, 8)}`;
    await created(
      server.admin('POST', '/clients', {
        clientId,
        clientType: 'confidential',
        profile: 'fapi2-security',
        tokenEndpointAuthMethod: 'tls_client_auth',
        tlsClientAuthSanDns: 'rp.example',
        tlsClientCertificateBoundAccessTokens: true,
        redirectUris: [REDIRECT_URI],
        scopes: ['openid', 'profile'],
      }),
    );
    const rp = { clientId, redirectUri: REDIRECT_URI };
    const request = await authorizationRequest(server, rp, { scope: 'openid', nonce: 'fapi-mtls' });
    const parameters = Object.fromEntries(new URL(request.url).searchParams);
    const pushed = await postForm(server, '/par', parameters, forwarded(client));
    expect(pushed.status, JSON.stringify(pushed.body)).to.equal(201);
    const refused = await postForm(server, '/par', parameters, forwarded(other));
    expect(refused.status).to.equal(401);

    const agent = new FetchUserAgent();
    const url = `${server.config.issuer}/authorize?${new URLSearchParams({ client_id: clientId, request_uri: pushed.body.request_uri })}`;
    const login = await agent.navigate(url, arrivingAt(REDIRECT_URI));
    const landed = await passDevIdpForms(agent, login, `fapi-${randomUUID().slice(0, 6)}`, arrivingAt(REDIRECT_URI));
    expect(landed.url.searchParams.get('iss')).to.equal(server.config.issuer);
    const code = landed.url.searchParams.get('code')!;
    const redeem = (headers: Record<string, string>) =>
      postForm(
        server,
        '/token',
        {
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT_URI,
          code_verifier: request.codeVerifier,
          client_id: clientId,
        },
        headers,
      );
    expect((await redeem({})).status, 'no certificate').to.equal(401);
    const tokens = await redeem(forwarded(client));
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    expect(tokens.body.token_type).to.equal('Bearer');
    const header = JSON.parse(Buffer.from(tokens.body.id_token.split('.')[0], 'base64url').toString('utf8'));
    expect(header.alg).to.equal('PS256');
  });
});

async function created(pending: Promise<{ status: number; body: unknown }>): Promise<void> {
  const { status, body } = await pending;
  if (status !== 201) throw new Error(`not created: ${status} ${JSON.stringify(body)}`);
}

/**
 * A trusted proxy that re-encrypts to Arbiter's TLS listener and presents a certificate of its own
 * there (nginx `proxy_ssl_certificate`, a service mesh), forwarding the client's in the header.
 * Found 2026-11-30: the connection's certificate won, so every token was bound to the proxy's, and
 * anyone behind the proxy could use a stolen one; the client's own certificate was refused.
 */
describe('RFC 8705 through a trusted proxy that presents a certificate of its own to the TLS listener', function () {
  const HEADER = 'x-ssl-client-cert';
  let pki: Awaited<ReturnType<typeof TestPki.create>>;
  let server: TestServer;
  let proxy: IssuedCertificate;
  let client: IssuedCertificate;
  let attacker: IssuedCertificate;
  let secret: string;
  const clientId = `mtls-behind-proxy-${randomUUID().slice(0, 8)}`;

  before(async function () {
    pki = await TestPki.create();
    proxy = await pki.issue('proxy', '/CN=edge-proxy');
    client = await pki.issue('client', '/CN=client-behind-proxy');
    attacker = await pki.issue('attacker', '/CN=attacker');
    const port = await freePort();
    // Its own server: a TLS listener whose every local peer is a trusted proxy.
    server = await readyServer({
      PORT: String(port),
      ISSUER: `https://127.0.0.1:${port}`,
      ADMIN_PORT: '0',
      TLS_CERT_FILE: pki.server.certFile,
      TLS_KEY_FILE: pki.server.keyFile,
      TLS_CLIENT_CA_FILE: pki.caFile,
      MTLS_CERTIFICATE_HEADER: HEADER,
      TRUSTED_PROXIES: '127.0.0.1,::1',
    });
    secret = await confidentialClient(server, clientId, {
      scopes: ['introspection'],
      tlsClientCertificateBoundAccessTokens: true,
    });
  });
  after(async function () {
    await server?.close();
    pki?.close();
  });

  /** A form POSTed by the proxy: over its own TLS connection (its certificate), with `forwarded` in the header. */
  const throughProxy = (
    path: string,
    form: Record<string, string>,
    forwarded: IssuedCertificate | null,
    authorization: string,
  ) =>
    tlsRequest(server, pki, 'POST', path, new URLSearchParams(form).toString(), proxy, {
      ...FORM,
      Authorization: authorization,
      ...(forwarded ? { [HEADER]: encodeURIComponent(forwarded.cert) } : {}),
    });

  it("binds the token to the forwarded certificate, never the proxy's, and refuses it with another certificate or none", async function () {
    const issued = await throughProxy(
      '/token',
      { grant_type: 'client_credentials', scope: 'introspection' },
      client,
      basic(clientId, secret),
    );
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    const token = issued.body.access_token;
    const introspected = await throughProxy('/introspect', { token }, client, `Bearer ${token}`);
    expect(introspected.status, JSON.stringify(introspected.body)).to.equal(200);
    expect(introspected.body.cnf).to.deep.equal({ 'x5t#S256': client.thumbprint });
    for (const forwarded of [attacker, null]) {
      const stolen = await throughProxy('/introspect', { token }, forwarded, `Bearer ${token}`);
      expect(stolen.status, forwarded ? 'another certificate' : 'none forwarded').to.equal(401);
      expect(stolen.body).not.to.have.property('active');
    }
  });
});

/**
 * A server without mutual TLS (neither TLS_CERT_FILE nor MTLS_CERTIFICATE_HEADER): a client
 * registered for an RFC 8705 method cannot authenticate. /register refuses the method (RFC 7591
 * §3.2.2); a record the Admin API holds anyway (made before mutual TLS was switched off) is
 * answered as an unknown client at /token (RFC 6749 §5.2: 401 invalid_client).
 */
describe('RFC 8705 methods on a server without mutual TLS', function () {
  let server: TestServer;

  before(async function () {
    server = await withServer();
  });

  it('refuses tls_client_auth and self_signed_tls_client_auth at /register with invalid_client_metadata', async function () {
    for (const method of ['tls_client_auth', 'self_signed_tls_client_auth']) {
      const { status, body } = await postJson(server, '/register', {
        redirect_uris: ['https://no-mtls.example/cb'],
        grant_types: ['client_credentials'],
        token_endpoint_auth_method: method,
        tls_client_auth_subject_dn: 'CN=client',
      });
      expect(status, method).to.equal(400);
      expect(body.error, method).to.equal('invalid_client_metadata');
      expect(body.error_description, method).to.match(/token_endpoint_auth_method .* is not offered/);
    }
  });

  it('answers a tls_client_auth client of the Admin API with 401 invalid_client at /token', async function () {
    const clientId = `no-mtls-${randomUUID().slice(0, 8)}`;
    await created(
      server.admin('POST', '/clients', {
        clientId,
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'tls_client_auth',
        tlsClientAuthSubjectDn: 'CN=client',
      }),
    );
    const { status, body } = await postForm(server, '/token', {
      grant_type: 'client_credentials',
      client_id: clientId,
    });
    expect(status, JSON.stringify(body)).to.equal(401);
    expect(body.error).to.equal('invalid_client');
  });
});

async function postJson(server: TestServer, path: string, json: unknown): Promise<Answer> {
  const response = await server.request(path, { method: 'POST', json });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}
