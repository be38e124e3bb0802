import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { decodeJwt, exportJWK, generateKeyPair } from 'jose';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, registerPublicClient, withSignInServer } from '../support/dev-idp.js';
import { postForm } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';

/**
 * The code, refresh and client_credentials grants driven by openid-client as the relying
 * party, with the rules of the spec's POST /token section: PKCE S256 and plain, single-use
 * codes, refresh rotation for public clients, each client authentication method, DPoP.
 */
describe('Grants with openid-client as the relying party', () => {
  const REDIRECT_URI = 'http://127.0.0.1:1/rp/callback';
  const insecure = { execute: [client.allowInsecureRequests] };
  let server: TestServer;
  let spa: client.Configuration;

  before(async () => {
    ({ server } = await withSignInServer());
    const registered = await registerPublicClient(server, REDIRECT_URI);
    spa = await client.discovery(
      new URL(server.config.issuer),
      registered.clientId,
      undefined,
      client.None(),
      insecure,
    );
  });

  /** Signs `login` in at the dev IdP and returns the URL the browser arrives at. */
  async function signIn(
    configuration: client.Configuration,
    parameters: Record<string, string>,
    login = 'alice',
  ): Promise<URL> {
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(
      client.buildAuthorizationUrl(configuration, { redirect_uri: REDIRECT_URI, ...parameters }),
      arrivingAt(REDIRECT_URI),
    );
    return (await passDevIdpForms(agent, loginPage, login, arrivingAt(REDIRECT_URI))).url;
  }

  /** A sign-in with PKCE S256, redeemed for tokens. */
  async function codeGrant(configuration = spa, parameters: Record<string, string> = {}) {
    const codeVerifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const redirect = await signIn(configuration, {
      scope: 'openid profile email',
      state,
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      ...parameters,
    });
    return client.authorizationCodeGrant(configuration, redirect, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
      expectedNonce: parameters.nonce,
    });
  }

  /** The OAuth error code of a rejected openid-client call. */
  async function errorOf(call: Promise<unknown>): Promise<string> {
    try {
      await call;
    } catch (error) {
      if (error instanceof client.ResponseBodyError) return error.error;
      throw error;
    }
    throw new Error('expected the call to be refused');
  }

  async function userinfoStatus(accessToken: string): Promise<number> {
    const response = await server.request('/userinfo', { headers: { Authorization: `Bearer ${accessToken}` } });
    await response.body?.cancel();
    return response.status;
  }

  describe('authorization_code', () => {
    it('redeems a code made with PKCE plain (the verifier is the challenge)', async () => {
      const codeVerifier = client.randomPKCECodeVerifier();
      const state = client.randomState();
      const redirect = await signIn(spa, {
        scope: 'openid',
        state,
        code_challenge: codeVerifier,
        code_challenge_method: 'plain',
      });

      const tokens = await client.authorizationCodeGrant(spa, redirect, {
        pkceCodeVerifier: codeVerifier,
        expectedState: state,
      });

      expect(tokens.access_token).to.be.a('string');
      expect(tokens.claims()?.sub).to.equal('alice');
    });

    it('refuses a wrong PKCE verifier with invalid_grant', async () => {
      const state = client.randomState();
      const redirect = await signIn(spa, {
        scope: 'openid',
        state,
        code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
        code_challenge_method: 'S256',
      });

      expect(
        await errorOf(
          client.authorizationCodeGrant(spa, redirect, {
            pkceCodeVerifier: client.randomPKCECodeVerifier(),
            expectedState: state,
          }),
        ),
      ).to.equal('invalid_grant');
    });

    it('refuses a redirect_uri other than the one of the authorization request with invalid_grant', async () => {
      const codeVerifier = client.randomPKCECodeVerifier();
      const redirect = await signIn(spa, {
        scope: 'openid',
        state: 's',
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      });
      const code = redirect.searchParams.get('code')!;

      const { status, body } = await postForm(server, '/token', {
        grant_type: 'authorization_code',
        code,
        client_id: spa.clientMetadata().client_id,
        code_verifier: codeVerifier,
        redirect_uri: 'http://127.0.0.1:1/elsewhere',
      });

      expect(status).to.equal(400);
      expect(body.error).to.equal('invalid_grant');
    });

    it('uses a code once: a second use is invalid_grant and revokes the tokens issued from it', async () => {
      const codeVerifier = client.randomPKCECodeVerifier();
      const redirect = await signIn(spa, {
        scope: 'openid',
        state: 's',
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      });
      const form = {
        grant_type: 'authorization_code',
        code: redirect.searchParams.get('code')!,
        client_id: spa.clientMetadata().client_id,
        code_verifier: codeVerifier,
        redirect_uri: REDIRECT_URI,
      };

      const first = await postForm(server, '/token', form);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(await userinfoStatus(first.body.access_token)).to.equal(200);

      const second = await postForm(server, '/token', form);
      expect(second.status).to.equal(400);
      expect(second.body.error).to.equal('invalid_grant');
      expect(await userinfoStatus(first.body.access_token), 'the first access token is revoked').to.equal(401);
      expect(
        await errorOf(client.refreshTokenGrant(spa, first.body.refresh_token)),
        'so is its refresh token',
      ).to.equal('invalid_grant');
    });

    it('answers with the spec fields and an RS256 ID token without at_hash, with auth_time when max_age was asked', async () => {
      const tokens = await codeGrant(spa, { nonce: 'n-1', max_age: '300' });

      expect(tokens.token_type.toLowerCase()).to.equal('bearer');
      expect(tokens.expires_in).to.be.a('number');
      expect(tokens.access_token, 'opaque, not a JWT').to.match(/^[A-Za-z0-9_-]+$/);
      const header = JSON.parse(Buffer.from(tokens.id_token!.split('.')[0]!, 'base64url').toString());
      expect(header.alg).to.equal('RS256');
      const idToken = decodeJwt(tokens.id_token!);
      expect(idToken).to.include({ iss: server.config.issuer, sub: 'alice', nonce: 'n-1' });
      expect(idToken.auth_time).to.be.a('number');
      expect(idToken).not.to.have.property('at_hash');
      expect(idToken.exp).to.be.greaterThan(idToken.iat!);
    });

    it('issues no ID token, and no auth_time, when openid is not granted', async () => {
      const tokens = await codeGrant(spa, { scope: 'profile' });

      expect(tokens.scope).to.equal('profile');
      expect(tokens).not.to.have.property('id_token');
    });
  });

  describe('refresh_token', () => {
    it('comes with the code grant without offline_access, and rotates for a public client on every use', async () => {
      const tokens = await codeGrant();
      expect(tokens.refresh_token, 'issued by default').to.be.a('string');
      expect(tokens.scope?.split(' ')).not.to.include('offline_access');

      const refreshed = await client.refreshTokenGrant(spa, tokens.refresh_token!);
      expect(refreshed.refresh_token).to.be.a('string').and.not.equal(tokens.refresh_token);
      expect(refreshed.scope?.split(' ').sort()).to.deep.equal(['email', 'openid', 'profile']);
      expect(await userinfoStatus(refreshed.access_token)).to.equal(200);

      expect(
        await errorOf(client.refreshTokenGrant(spa, tokens.refresh_token!)),
        'the old refresh token no longer works',
      ).to.equal('invalid_grant');
    });

    it('narrows to a subset of the original scopes and refuses more', async () => {
      const tokens = await codeGrant();

      const narrowed = await client.refreshTokenGrant(spa, tokens.refresh_token!, { scope: 'openid email' });
      expect(narrowed.scope?.split(' ').sort()).to.deep.equal(['email', 'openid']);

      expect(await errorOf(client.refreshTokenGrant(spa, narrowed.refresh_token!, { scope: 'openid admin' }))).to.equal(
        'invalid_scope',
      );
    });

    it('issues a refreshed ID token without the nonce of the sign-in (OIDC Core §12.2)', async () => {
      const nonce = client.randomNonce();
      const tokens = await codeGrant(spa, { nonce });
      expect(tokens.claims()?.nonce).to.equal(nonce);

      const refreshed = await client.refreshTokenGrant(spa, tokens.refresh_token!);
      const claims = refreshed.claims();
      expect(claims?.sub).to.equal(tokens.claims()?.sub);
      expect(claims).not.to.have.property('nonce');
    });

    it('leaves scope out, never "scope": "", for a resource granted none of the scopes asked (RFC 6749 §3.3)', async () => {
      const resource = 'https://untyped-api.example.test/';
      const created = await server.admin('POST', '/resource-servers', { resourceIndicator: resource });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const tokens = await codeGrant(spa, { resource });
      expect(tokens.access_token).to.be.a('string');
      expect(tokens.id_token, 'the sign-in still has its ID token').to.be.a('string');
      expect(tokens).not.to.have.property('scope');

      const refreshed = await client.refreshTokenGrant(spa, tokens.refresh_token!, { resource });
      expect(refreshed.access_token).to.be.a('string');
      expect(refreshed).not.to.have.property('scope');
    });

    it('refuses an unknown refresh token with invalid_grant', async () => {
      expect(await errorOf(client.refreshTokenGrant(spa, 'not-a-refresh-token'))).to.equal('invalid_grant');
    });
  });

  describe('a confidential client', () => {
    let confidential: client.Configuration;
    const secret = 'web-secret-value';

    before(async () => {
      const created = await server.admin('POST', '/clients', {
        clientId: 'web',
        clientType: 'confidential',
        clientSecret: bcrypt.hashSync(secret, 4),
        redirectUris: [REDIRECT_URI],
        scopes: ['openid', 'profile', 'email', 'read'],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      confidential = await client.discovery(
        new URL(server.config.issuer),
        'web',
        undefined,
        client.ClientSecretBasic(secret),
        insecure,
      );
    });

    it('signs in with client_secret_basic; its refresh token keeps working (no rotation)', async () => {
      const tokens = await codeGrant(confidential);
      expect(tokens.refresh_token).to.be.a('string');

      const refreshed = await client.refreshTokenGrant(confidential, tokens.refresh_token!);
      expect(refreshed.access_token).to.be.a('string');
      expect((await client.refreshTokenGrant(confidential, tokens.refresh_token!)).access_token).to.be.a('string');
    });

    it('gets client_credentials tokens with client_secret_basic and client_secret_post', async () => {
      const viaBasic = await client.clientCredentialsGrant(confidential, { scope: 'read' });
      expect(viaBasic.scope).to.equal('read');
      expect(viaBasic).not.to.have.property('refresh_token');

      // Each client uses the method it registered: web (client_secret_basic) may not post its secret.
      const webPost = await client.discovery(
        new URL(server.config.issuer),
        'web',
        undefined,
        client.ClientSecretPost(secret),
        insecure,
      );
      expect(await errorOf(client.clientCredentialsGrant(webPost, { scope: 'read' }))).to.equal('invalid_client');
      const created = await server.admin('POST', '/clients', {
        clientId: 'web-post',
        clientType: 'confidential',
        clientSecret: bcrypt.hashSync(secret, 4),
        tokenEndpointAuthMethod: 'client_secret_post',
        scopes: ['read'],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const post = await client.discovery(
        new URL(server.config.issuer),
        'web-post',
        undefined,
        client.ClientSecretPost(secret),
        insecure,
      );
      expect((await client.clientCredentialsGrant(post, { scope: 'read' })).scope).to.equal('read');

      const wrong = await client.discovery(
        new URL(server.config.issuer),
        'web-post',
        undefined,
        client.ClientSecretPost('wrong'),
        insecure,
      );
      expect(await errorOf(client.clientCredentialsGrant(wrong, { scope: 'read' }))).to.equal('invalid_client');
    });

    it('gets client_credentials tokens and introspects with private_key_jwt', async () => {
      const { publicKey, privateKey } = await generateKeyPair('RS256');
      const jwk = { ...(await exportJWK(publicKey)), kid: 'rp-key', alg: 'RS256', use: 'sig' };
      const created = await server.admin('POST', '/clients', {
        clientId: 'jwt-rp',
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'private_key_jwt',
        jwks: { keys: [jwk] },
        scopes: ['read'],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const viaJwt = await client.discovery(
        new URL(server.config.issuer),
        'jwt-rp',
        undefined,
        client.PrivateKeyJwt({ key: privateKey, kid: 'rp-key' }),
        insecure,
      );

      expect((await client.clientCredentialsGrant(viaJwt, { scope: 'read' })).scope).to.equal('read');

      // The same client, entitled as a resource server, introspects with its assertion too.
      await server.admin('POST', '/resource-servers', {
        resourceIndicator: 'https://jwt-rp.example.test/',
        clientId: created.body.id,
      });
      const issued = await client.clientCredentialsGrant(confidential, { scope: 'read' });
      expect(await client.tokenIntrospection(viaJwt, issued.access_token)).to.include({
        active: true,
        client_id: 'web',
        scope: 'read',
      });

      const { privateKey: otherKey } = await generateKeyPair('RS256');
      const impostor = await client.discovery(
        new URL(server.config.issuer),
        'jwt-rp',
        undefined,
        client.PrivateKeyJwt({ key: otherKey, kid: 'rp-key' }),
        insecure,
      );
      expect(await errorOf(client.clientCredentialsGrant(impostor, { scope: 'read' }))).to.equal('invalid_client');
    });

    it('gets DPoP-bound tokens whose key thumbprint shows at introspection', async () => {
      const dpop = client.getDPoPHandle(confidential, await client.randomDPoPKeyPair('ES256'));

      const tokens = await client.clientCredentialsGrant(confidential, { scope: 'read' }, { DPoP: dpop });

      expect(tokens.token_type.toLowerCase()).to.equal('dpop');
      const rs = await server.admin('POST', '/clients', {
        clientId: 'rp-rs',
        clientType: 'confidential',
        clientSecret: bcrypt.hashSync('rp-rs-secret', 4),
        scopes: ['introspection'],
      });
      expect(rs.status).to.equal(201);
      // Basic callers must be registered resource servers to introspect (the default pack).
      await server.admin('POST', '/resource-servers', {
        resourceIndicator: 'https://rp-rs.example.test/',
        clientId: rs.body.id,
      });
      const resourceServer = await client.discovery(
        new URL(server.config.issuer),
        'rp-rs',
        undefined,
        client.ClientSecretBasic('rp-rs-secret'),
        insecure,
      );
      const introspection = await client.tokenIntrospection(resourceServer, tokens.access_token);
      expect(introspection.active).to.equal(true);
      expect(introspection.cnf?.jkt).to.be.a('string');
    });
  });
});
