import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import * as client from 'openid-client';
import {
  createRemoteJWKSet,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  jwtVerify,
  SignJWT,
  type CryptoKey,
  type JWK,
} from 'jose';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, withSignInServer } from '../support/dev-idp.js';
import { clientCredentials, confidentialClient, FORM } from '../support/oauth.js';
import { inTenant, readyServer, type TestServer } from '../support/server.js';

const REDIRECT_URI = 'https://fapi-rp.example.test/cb';

/** A key pair and its public JWK. */
async function keyPair(): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid: randomUUID(), alg: 'ES256' } };
}

/**
 * The FAPI 2.0 Security Profile for a client that opts in (`profile: "fapi2-security"`): its
 * authorization requests are pushed, with PKCE S256; it authenticates with private_key_jwt; its
 * access tokens are DPoP-bound; its ID tokens are signed PS256; the authorization response names
 * the issuer. Each rule is refused with the spec's error when broken.
 */
describe('FAPI 2.0 Security Profile, per client', function () {
  let server: TestServer;
  let clientKey: { privateKey: CryptoKey; jwk: JWK };
  let dpopKey: { privateKey: CryptoKey; jwk: JWK };
  const clientId = `fapi-${randomUUID().slice(0, 8)}`;

  before(async function () {
    ({ server } = await withSignInServer());
    clientKey = await keyPair();
    dpopKey = await keyPair();
    const created = await server.admin('POST', '/clients', {
      clientId,
      clientType: 'confidential',
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwks: { keys: [clientKey.jwk] },
      redirectUris: [REDIRECT_URI],
      scopes: ['openid', 'profile'],
      profile: 'fapi2-security',
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
  });

  /** private_key_jwt (RFC 7523), its audience the issuer itself (FAPI 2.0 §5.3.2.1). */
  const assertion = () =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: clientKey.jwk.kid })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setAudience(server.config.issuer)
      .setJti(randomUUID())
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(clientKey.privateKey);

  const dpopProof = (htu: string) =>
    new SignJWT({ htm: 'POST', htu, jti: randomUUID(), iat: Math.floor(Date.now() / 1000) })
      .setProtectedHeader({
        typ: 'dpop+jwt',
        alg: 'ES256',
        jwk: { kty: 'EC', crv: 'P-256', x: dpopKey.jwk.x, y: dpopKey.jwk.y },
      })
      .sign(dpopKey.privateKey);

  async function post(path: string, parameters: Record<string, string>, headers: Record<string, string> = {}) {
    const answer = await server.request(path, {
      method: 'POST',
      headers: { ...FORM, ...headers },
      body: new URLSearchParams(parameters).toString(),
    });
    return { status: answer.status, body: (await answer.json()) as any };
  }

  async function pushed(extra: Record<string, string> = {}) {
    const codeVerifier = client.randomPKCECodeVerifier();
    const answer = await post('/par', {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT_URI,
      scope: 'openid profile',
      state: 'fapi-state',
      nonce: 'fapi-nonce',
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: await assertion(),
      ...extra,
    });
    return { ...answer, codeVerifier };
  }

  it('signs in through a pushed request, redeems the code with private_key_jwt and DPoP, and signs the ID token PS256', async function () {
    const par = await pushed();
    expect(par.status, JSON.stringify(par.body)).to.equal(201);

    const agent = new FetchUserAgent();
    const url = `${server.config.issuer}/authorize?${new URLSearchParams({ client_id: clientId, request_uri: par.body.request_uri })}`;
    const login = await agent.navigate(url, arrivingAt(REDIRECT_URI));
    const landed = await passDevIdpForms(
      agent,
      login,
      `fapi-user-${randomUUID().slice(0, 6)}`,
      arrivingAt(REDIRECT_URI),
    );
    expect(landed.url.searchParams.get('iss'), 'RFC 9207').to.equal(server.config.issuer);
    const code = landed.url.searchParams.get('code')!;

    const tokens = await post(
      '/token',
      {
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT_URI,
        code_verifier: par.codeVerifier,
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: await assertion(),
      },
      { DPoP: await dpopProof(`${server.config.issuer}/token`) },
    );
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    expect(tokens.body.token_type).to.equal('DPoP');
    expect(decodeProtectedHeader(tokens.body.id_token).alg).to.equal('PS256');
    const metadata = (await (await server.request('/.well-known/openid-configuration')).json()) as { jwks_uri: string };
    const { payload } = await jwtVerify(tokens.body.id_token, createRemoteJWKSet(new URL(metadata.jwks_uri)), {
      issuer: server.config.issuer,
      audience: clientId,
    });
    expect(payload.nonce).to.equal('fapi-nonce');
  });

  it('refuses an authorization request that was not pushed', async function () {
    const codeVerifier = client.randomPKCECodeVerifier();
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      state: 's',
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
    });
    const answer = await server.request(`/authorize?${query}`, { redirect: 'manual' });
    const location = new URL(answer.headers.get('location') ?? 'http://none.invalid/');
    const text = answer.status === 400 ? await answer.text() : '';
    const error = location.searchParams.get('error') ?? text;
    expect(error).to.contain('invalid_request');
    expect(location.searchParams.get('error_description') ?? text).to.match(/[Pp]ushed [Aa]uthorization [Rr]equest/);
  });

  it('refuses PKCE plain in a pushed request with invalid_request', async function () {
    const verifier = client.randomPKCECodeVerifier();
    const answer = await pushed({ code_challenge: verifier, code_challenge_method: 'plain' });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
    expect(answer.body).to.include({ error: 'invalid_request' });
    expect(answer.body.error_description).to.contain('S256');
  });

  it('refuses a token request without a DPoP proof, and authentication by anything but private_key_jwt', async function () {
    const withoutProof = await post('/token', {
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: await assertion(),
    });
    expect(withoutProof.status, JSON.stringify(withoutProof.body)).to.equal(400);
    expect(withoutProof.body.error).to.equal('invalid_dpop_proof');
    expect(withoutProof.body.error_description).to.match(/DPoP/);

    const bySecret = await post(
      '/token',
      { grant_type: 'client_credentials' },
      { Authorization: `Basic ${Buffer.from(`${clientId}:a-secret`).toString('base64')}` },
    );
    expect(bySecret.status).to.equal(401);
    expect(bySecret.body.error).to.equal('invalid_client');
  });

  it('advertises PS256 for ID tokens and publishes the PS256 key', async function () {
    const metadata = (await (await server.request('/.well-known/openid-configuration')).json()) as any;
    expect(metadata.id_token_signing_alg_values_supported).to.include.members(['RS256', 'PS256']);
    const jwks = (await (await fetch(metadata.jwks_uri)).json()) as { keys: JWK[] };
    expect(jwks.keys.map((key) => key.alg)).to.include.members(['RS256', 'PS256']);
  });
});

/** FAPI2_SECURITY_TENANTS holds every client of a tenant to the profile, whatever its record says. */
describe('FAPI 2.0 Security Profile, per tenant', function () {
  let server: TestServer;

  before(async function () {
    server = await readyServer({ TENANTS: 'fapi-bank', FAPI2_SECURITY_TENANTS: 'fapi-bank' });
  });
  after(async function () {
    await server?.close();
  });

  it('refuses a client secret in the tenant held to the profile, and takes it in the others', async function () {
    const held = inTenant(server, 'fapi-bank');
    const heldSecret = await confidentialClient(held, 'bank-app', { scopes: ['read'] }, 'fapi-bank');
    const refused = await clientCredentials(held, 'bank-app', heldSecret, { scope: 'read' });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(401);
    expect(refused.body.error).to.equal('invalid_client');

    const freeSecret = await confidentialClient(server, 'free-app', { scopes: ['read'] });
    const taken = await clientCredentials(server, 'free-app', freeSecret, { scope: 'read' });
    expect(taken.status, JSON.stringify(taken.body)).to.equal(200);
  });
});
