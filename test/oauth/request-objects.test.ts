import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { CompactSign, exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type CryptoKey, type JWK } from 'jose';
import * as client from 'openid-client';
import { FetchUserAgent, type Page } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, withSignInServer } from '../support/dev-idp.js';
import { basic, confidentialClient, eventually, postForm } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';

const REDIRECT = 'http://127.0.0.1:1/jar/callback';
const ASYMMETRIC = ['RS256', 'PS256', 'ES256', 'Ed25519', 'EdDSA'];

interface KeyPair {
  privateKey: CryptoKey;
  jwk: JWK;
}

async function keyPair(alg: string, kid: string): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, use: 'sig' } };
}

/**
 * RFC 9101 request objects (JAR): `request` by value at /authorize and at /par, verified with the
 * client's registered keys; the request object's parameters, not the query's, are decided on;
 * unsigned, foreign-key, symmetric and mismatching request objects refused.
 */
describe('Request objects (RFC 9101)', function () {
  let server: TestServer;
  let rsa: KeyPair;
  let ec: KeyPair;
  let stranger: KeyPair;
  let pss: KeyPair;
  let webSecret: string;

  before(async function () {
    ({ server } = await withSignInServer());
    [rsa, ec, stranger, pss] = await Promise.all([
      keyPair('RS256', 'jar-rsa'),
      keyPair('ES256', 'jar-ec'),
      keyPair('RS256', 'jar-rsa'),
      keyPair('PS256', 'jar-pss'),
    ]);
    const openid = { redirectUris: [REDIRECT], scopes: ['openid', 'profile', 'email'] };
    webSecret = await confidentialClient(server, 'jar-web', { ...openid, jwks: { keys: [rsa.jwk] } });
    await confidentialClient(server, 'jar-ps256', {
      ...openid,
      jwks: { keys: [rsa.jwk, pss.jwk] },
      requestObjectSigningAlg: 'PS256',
    });
    await confidentialClient(server, 'jar-nokeys', openid);
    const pkjwt = await server.admin('POST', '/clients', {
      clientId: 'jar-pkjwt',
      clientType: 'confidential',
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwks: { keys: [ec.jwk] },
      ...openid,
    });
    expect(pkjwt.status, JSON.stringify(pkjwt.body)).to.equal(201);
  });

  /** A code-flow request's parameters with PKCE S256; `extra` adds to or overrides them. */
  async function requestParameters(clientId: string, extra: Record<string, unknown> = {}) {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const parameters: Record<string, unknown> = {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      scope: 'openid profile',
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      ...extra,
    };
    return { verifier, state, parameters };
  }

  /** A request object of `parameters`, signed as RFC 9101 §4 says (iss the client, aud the issuer). */
  function signed(parameters: Record<string, unknown>, key: CryptoKey, alg = 'RS256', kid = 'jar-rsa') {
    return new SignJWT(parameters)
      .setProtectedHeader({ alg, kid, typ: 'oauth-authz-req+jwt' })
      .setIssuer(parameters.client_id as string)
      .setAudience(server.config.issuer)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(key);
  }

  const authorizeUrl = (query: Record<string, string>) =>
    `${server.config.issuer}/authorize?${new URLSearchParams(query)}`;

  /** Follows /authorize through the dev IdP's sign-in to the redirect_uri (or to whatever page stops it). */
  async function signIn(url: string): Promise<Page> {
    const agent = new FetchUserAgent();
    const first = await agent.navigate(url, arrivingAt(REDIRECT));
    if (first.url.href.startsWith(REDIRECT) || first.status !== 200 || !first.body?.includes('<form')) return first;
    return passDevIdpForms(agent, first, 'jarvis', arrivingAt(REDIRECT));
  }

  const redeem = (code: string, verifier: string) =>
    postForm(
      server,
      '/token',
      { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier },
      { Authorization: basic('jar-web', webSecret) },
    );

  /**
   * The error /authorize answers without a code: at the client's registered redirect_uri, or on an
   * error page (400); never anywhere else.
   */
  async function refusedAuthorization(query: Record<string, string>): Promise<string> {
    const response = await server.request(`/authorize?${new URLSearchParams(query)}`, { redirect: 'manual' });
    const location = response.headers.get('location');
    if (!location) {
      expect(response.status).to.equal(400);
      return /<dt>Error<\/dt><dd><code>([a-z_]+)<\/code>/.exec(await response.text())?.[1] ?? 'no error named';
    }
    await response.body?.cancel();
    const redirect = new URL(location, server.config.issuer);
    expect(`${redirect.origin}${redirect.pathname}`, location).to.equal(REDIRECT);
    expect(redirect.searchParams.get('code')).to.equal(null);
    return redirect.searchParams.get('error') ?? 'no error named';
  }

  /** /authorize started with `query` went on to the sign-in (no error, no code yet). */
  async function accepted(query: Record<string, string>): Promise<boolean> {
    const response = await server.request(`/authorize?${new URLSearchParams(query)}`, { redirect: 'manual' });
    await response.body?.cancel();
    const location = response.headers.get('location') ?? '';
    return response.status === 302 && !location.startsWith(REDIRECT);
  }

  it('advertises request objects by value, signed with asymmetric algorithms only, and no request_uri of its own', async function () {
    const document = (await (await server.request('/.well-known/openid-configuration')).json()) as any;
    expect(document.request_parameter_supported).to.equal(true);
    expect(document.request_uri_parameter_supported).to.equal(false);
    expect(document.request_object_signing_alg_values_supported).to.deep.equal(ASYMMETRIC);
  });

  describe('by value at /authorize', function () {
    it('signs in with the signed parameters and ignores the query beside them', async function () {
      const { verifier, state, parameters } = await requestParameters('jar-web', { scope: 'openid email' });
      const arrived = await signIn(
        authorizeUrl({
          client_id: 'jar-web',
          request: await signed(parameters, rsa.privateKey),
          scope: 'openid profile',
          state: 'from-the-query',
          redirect_uri: 'http://127.0.0.1:1/elsewhere',
        }),
      );
      expect(arrived.url.href.startsWith(REDIRECT), arrived.url.href).to.equal(true);
      expect(arrived.url.searchParams.get('state')).to.equal(state);
      const tokens = await redeem(arrived.url.searchParams.get('code')!, verifier);
      expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
      expect(tokens.body.scope.split(' ').sort()).to.deep.equal(['email', 'openid']);

      // The decision is taken when the request resumes after sign-in, at /authorize/<uid>.
      const entry = (await server.admin('GET', '/audit-logs?clientId=jar-web&size=50&sort=id,desc')).body.content.find(
        (candidate: any) => candidate.endpoint.startsWith('/authorize') && candidate.policyInput?.request,
      );
      expect(entry.policyInput.request.scopes.sort()).to.deep.equal(['email', 'openid']);
      expect(entry.policyInput.request.parameters.state).to.equal(state);
    });

    it("applies the policy's refusal to the signed scope, whatever the query says", async function () {
      const { state, parameters } = await requestParameters('jar-web', { scope: 'introspection' });
      const arrived = await signIn(
        authorizeUrl({ client_id: 'jar-web', request: await signed(parameters, rsa.privateKey), scope: 'openid' }),
      );
      expect(arrived.url.searchParams.get('error'), arrived.url.href).to.equal('invalid_scope');
      expect(arrived.url.searchParams.get('state')).to.equal(state);
    });

    it('requires redirect_uri inside the request object (not beside it)', async function () {
      const { parameters } = await requestParameters('jar-web');
      delete parameters.redirect_uri;
      const response = await server.request(
        `/authorize?${new URLSearchParams({ client_id: 'jar-web', request: await signed(parameters, rsa.privateKey), redirect_uri: REDIRECT })}`,
        { redirect: 'manual' },
      );
      expect(response.status).to.equal(400);
      expect(response.headers.get('location')).to.equal(null);
      expect(((await response.json()) as any).error).to.equal('invalid_request');
    });
  });

  describe('refused request objects', function () {
    const refused = async (request: string, query: Record<string, string> = {}) =>
      refusedAuthorization({ client_id: 'jar-web', request, ...query });

    it('signed by a key the client has not registered (even under its kid)', async function () {
      const { parameters } = await requestParameters('jar-web');
      expect(await refused(await signed(parameters, stranger.privateKey))).to.equal('invalid_request_object');
    });

    it('unsigned (alg none), or signed with HS256 and the client secret', async function () {
      const { parameters } = await requestParameters('jar-web');
      const unsigned = new UnsecuredJWT(parameters)
        .setIssuer('jar-web')
        .setAudience(server.config.issuer)
        .setIssuedAt()
        .encode();
      expect(await refused(unsigned)).to.equal('invalid_request_object');
      expect(await refused(hs256(parameters, webSecret, server.config.issuer))).to.equal('invalid_request_object');
    });

    it('naming another client, issuer or audience, or expired', async function () {
      const { parameters } = await requestParameters('jar-web');
      const otherClient = await signed({ ...parameters, client_id: 'jar-nokeys' }, rsa.privateKey);
      expect(await refused(otherClient)).to.equal('invalid_request_object');
      const build = () => new SignJWT(parameters).setProtectedHeader({ alg: 'RS256', kid: 'jar-rsa' }).setIssuedAt();
      const otherIssuer = await build()
        .setIssuer('jar-nokeys')
        .setAudience(server.config.issuer)
        .setExpirationTime('5m');
      expect(await refused(await otherIssuer.sign(rsa.privateKey))).to.equal('invalid_request_object');
      const otherAudience = build()
        .setIssuer('jar-web')
        .setAudience('https://elsewhere.example.test')
        .setExpirationTime('5m');
      expect(await refused(await otherAudience.sign(rsa.privateKey))).to.equal('invalid_request_object');
      const expired = build().setIssuer('jar-web').setAudience(server.config.issuer).setExpirationTime(1);
      expect(await refused(await expired.sign(rsa.privateKey))).to.equal('invalid_request_object');
    });

    it('contradicting the query on response_type or client_id', async function () {
      const { parameters } = await requestParameters('jar-web');
      const request = await signed(parameters, rsa.privateKey);
      expect(await refused(request, { response_type: 'code id_token' })).to.equal('invalid_request_object');
      expect(await refusedAuthorization({ client_id: 'jar-nokeys', request, redirect_uri: REDIRECT })).to.equal(
        'invalid_request_object',
      );
    });

    it('holding a member that cannot be read as a parameter, signed or not (found 2026-11-30: a 500)', async function () {
      // Refused as the request object is read, before oidc-provider: a JSON answer, as for one nested too deep.
      const readRefusal = async (request: string) => {
        const response = await server.request(`/authorize?${new URLSearchParams({ client_id: 'jar-web', request })}`, {
          redirect: 'manual',
        });
        expect(response.status).to.equal(400);
        return ((await response.json()) as { error: string }).error;
      };
      const { parameters } = await requestParameters('jar-web');
      const unsigned = new UnsecuredJWT({ ...parameters, state: { toString: 'x' } })
        .setIssuer('jar-web')
        .setAudience(server.config.issuer)
        .encode();
      expect(await readRefusal(unsigned)).to.equal('invalid_request_object');
      for (const resource of [[['https://a.example.test/']], [{ toString: 'x' }]]) {
        const request = await signed({ ...parameters, resource }, rsa.privateKey);
        expect(await readRefusal(request), JSON.stringify(resource)).to.equal('invalid_request_object');
      }
      // A claim of an extension, an object, is no parameter: it passes as oidc-provider takes it.
      const extended = await signed({ ...parameters, vendor_context: { purpose: 'billing' } }, rsa.privateKey);
      expect(await accepted({ client_id: 'jar-web', request: extended })).to.equal(true);
    });

    it('holding request or request_uri itself', async function () {
      const { parameters } = await requestParameters('jar-web', { request_uri: 'urn:ietf:params:oauth:request_uri:x' });
      expect(await refused(await signed(parameters, rsa.privateKey))).to.equal('invalid_request_object');
    });

    it('from a client with no registered keys', async function () {
      const { parameters } = await requestParameters('jar-nokeys');
      expect(
        await refusedAuthorization({ client_id: 'jar-nokeys', request: await signed(parameters, rsa.privateKey) }),
      ).to.equal('invalid_request_object');
    });

    it('signed with another algorithm than the client registered (request_object_signing_alg)', async function () {
      const { parameters } = await requestParameters('jar-ps256');
      const rs256 = await signed(parameters, rsa.privateKey);
      expect(await refusedAuthorization({ client_id: 'jar-ps256', request: rs256 })).to.equal('invalid_request_object');
      const ps256 = await signed(parameters, pss.privateKey, 'PS256', 'jar-pss');
      expect(await accepted({ client_id: 'jar-ps256', request: ps256 })).to.equal(true);
    });

    it('asking PKCE plain: a signed challenge cannot be rewritten, only S256 is accepted inside one', async function () {
      const { parameters } = await requestParameters('jar-web', {
        code_challenge: client.randomPKCECodeVerifier(),
        code_challenge_method: 'plain',
      });
      expect(await refused(await signed(parameters, rsa.privateKey))).to.equal('invalid_request');
    });
  });

  describe('by value at /par', function () {
    it('is pushed by a private_key_jwt client and signs in (openid-client: JAR and PAR together)', async function () {
      const configuration = await client.discovery(
        new URL(server.config.issuer),
        'jar-pkjwt',
        undefined,
        client.PrivateKeyJwt(ec.privateKey, { [client.modifyAssertion]: (header) => void (header.kid = 'jar-ec') }),
        { execute: [client.allowInsecureRequests] },
      );
      const verifier = client.randomPKCECodeVerifier();
      const state = client.randomState();
      const { searchParams } = await client.buildAuthorizationUrlWithJAR(
        configuration,
        {
          redirect_uri: REDIRECT,
          scope: 'openid email',
          state,
          code_challenge: await client.calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
        },
        { key: ec.privateKey, kid: 'jar-ec' },
      );
      const redirectTo = await client.buildAuthorizationUrlWithPAR(configuration, searchParams);
      expect([...redirectTo.searchParams.keys()].sort()).to.deep.equal(['client_id', 'request_uri']);

      const arrived = await signIn(redirectTo.href);
      const tokens = await client.authorizationCodeGrant(configuration, arrived.url, {
        pkceCodeVerifier: verifier,
        expectedState: state,
      });
      expect(tokens.scope?.split(' ').sort()).to.deep.equal(['email', 'openid']);
      expect(tokens.claims()?.sub).to.equal('jarvis');
    });

    it('gives a request_uri that ends with its request object (RFC 9126 §2.2 expires_in), refused once expired', async function () {
      const { parameters } = await requestParameters('jar-web');
      const now = Math.floor(Date.now() / 1000);
      const shortLived = await new SignJWT(parameters)
        .setProtectedHeader({ alg: 'RS256', kid: 'jar-rsa' })
        .setIssuer('jar-web')
        .setAudience(server.config.issuer)
        .setIssuedAt(now)
        .setExpirationTime(now + 2)
        .sign(rsa.privateKey);
      const { status, body } = await postForm(
        server,
        '/par',
        { client_id: 'jar-web', request: shortLived },
        { Authorization: basic('jar-web', webSecret) },
      );
      expect(status, JSON.stringify(body)).to.equal(201);
      expect(body.expires_in).to.be.at.most(2);
      const query = { client_id: 'jar-web', request_uri: body.request_uri };
      await eventually(async () => !(await accepted(query)));
      expect(await refusedAuthorization(query)).to.equal('invalid_request_uri');
    });

    async function pushedRefusal(request: string): Promise<string> {
      const { status, body } = await postForm(
        server,
        '/par',
        { client_id: 'jar-web', request },
        { Authorization: basic('jar-web', webSecret) },
      );
      expect(status, JSON.stringify(body)).to.equal(400);
      return body.error;
    }

    it('refuses unsigned, foreign-key and mismatching request objects with 400 invalid_request_object', async function () {
      const { parameters } = await requestParameters('jar-web');
      const unsigned = new UnsecuredJWT(parameters).setIssuer('jar-web').setAudience(server.config.issuer).encode();
      expect(await pushedRefusal(unsigned)).to.equal('invalid_request_object');
      expect(await pushedRefusal(await signed(parameters, stranger.privateKey))).to.equal('invalid_request_object');
      const otherClient = await signed({ ...parameters, client_id: 'jar-pkjwt' }, rsa.privateKey);
      expect(await pushedRefusal(otherClient)).to.equal('invalid_request_object');
      const withObject = new UnsecuredJWT({ ...parameters, nonce: { toString: 'x' } })
        .setIssuer('jar-web')
        .setAudience(server.config.issuer)
        .encode();
      expect(await pushedRefusal(withObject)).to.equal('invalid_request_object');
    });

    it("applies /authorize's checks to the request object's parameters", async function () {
      const details = [{ type: 'urn:as:introspect' }];
      const { parameters } = await requestParameters('jar-web', { authorization_details: details });
      expect(await pushedRefusal(await signed(parameters, rsa.privateKey))).to.equal('invalid_request');
      const deep = JSON.parse(`${'['.repeat(40)}${']'.repeat(40)}`);
      const nested = await requestParameters('jar-web', { scope: undefined, authorization_details: deep });
      expect(await pushedRefusal(await signed(nested.parameters, rsa.privateKey))).to.equal(
        'invalid_authorization_details',
      );
      // Nested far deeper than the parameter check's depth, within /par's 64 KiB: refused before anything recurses into it (never a 500).
      const levels = 5_000;
      const { parameters: flat } = await requestParameters('jar-web');
      const now = Math.floor(Date.now() / 1000);
      const payload = JSON.stringify({ ...flat, iss: 'jar-web', aud: server.config.issuer, iat: now, exp: now + 300 });
      const deepText = `${payload.slice(0, -1)},"claims":${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}}`;
      const deepest = await new CompactSign(new TextEncoder().encode(deepText))
        .setProtectedHeader({ alg: 'RS256', kid: 'jar-rsa', typ: 'oauth-authz-req+jwt' })
        .sign(rsa.privateKey);
      expect(await pushedRefusal(deepest)).to.equal('invalid_request_object');
      const noRedirect = await requestParameters('jar-web', { redirect_uri: undefined });
      expect(await pushedRefusal(await signed(noRedirect.parameters, rsa.privateKey))).to.equal('invalid_request');
    });
  });

  describe('registration of request_object_signing_alg', function () {
    let register: (json: unknown) => Promise<{ status: number; body: any }>;

    before(async function () {
      // Open registration is off in the default policy; an initial access token lets one through.
      const { token } = (await server.admin('POST', '/initial-access-tokens', { name: 'jar test', uses: 10 })).body;
      register = async (json) => {
        const response = await server.request('/register', {
          method: 'POST',
          json,
          headers: { Authorization: `Bearer ${token}` },
        });
        return { status: response.status, body: await response.json() };
      };
    });

    it('accepts an asymmetric algorithm with keys, and the client then signs with it', async function () {
      const { status, body } = await register({
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: 'none',
        jwks: { keys: [ec.jwk] },
        request_object_signing_alg: 'ES256',
      });
      expect(status, JSON.stringify(body)).to.equal(201);
      expect(body.request_object_signing_alg).to.equal('ES256');
      const { parameters } = await requestParameters(body.client_id, { scope: 'openid' });
      const request = await signed(parameters, ec.privateKey, 'ES256', 'jar-ec');
      expect(await accepted({ client_id: body.client_id, request })).to.equal(true);
    });

    it('refuses HS256, none and unknown algorithms, and an algorithm without keys (invalid_client_metadata)', async function () {
      for (const alg of ['HS256', 'none', 'RS1']) {
        const { status, body } = await register({
          redirect_uris: [REDIRECT],
          token_endpoint_auth_method: 'none',
          jwks: { keys: [rsa.jwk] },
          request_object_signing_alg: alg,
        });
        expect([status, body.error], alg).to.deep.equal([400, 'invalid_client_metadata']);
      }
      const keyless = await register({ redirect_uris: [REDIRECT], request_object_signing_alg: 'RS256' });
      expect([keyless.status, keyless.body.error]).to.deep.equal([400, 'invalid_client_metadata']);
    });

    it('is an asymmetric algorithm in the Admin API too', async function () {
      const refused = await server.admin('POST', '/clients', {
        clientId: 'jar-admin-hs',
        clientType: 'public',
        jwks: { keys: [rsa.jwk] },
        requestObjectSigningAlg: 'HS256',
      });
      expect(refused.status).to.equal(400);
      expect(refused.body.field).to.equal('requestObjectSigningAlg');
    });
  });
});

/** A compact HS256 JWS, as a client would sign a request object with its secret. */
function hs256(payload: Record<string, unknown>, secret: string, audience: string): string {
  const now = Math.floor(Date.now() / 1000);
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${part({ alg: 'HS256' })}.${part({ ...payload, iss: payload.client_id, aud: audience, iat: now, exp: now + 300 })}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}
