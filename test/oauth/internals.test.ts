import { createHash, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { expect } from 'chai';
import Provider from 'oidc-provider';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import {
  atomicReplayDetection,
  builtInGrant,
  everyClientMayAskForEveryType,
  compareClientSecretsWith,
  findJwtAccessTokensToo,
  findTokenByValue,
  givenTokenParametersOnly,
  assertionAudiencesAt,
  knownScopes,
  noNonceInRefreshedIdTokens,
  refetchClientKeysOnUnfamiliarKid,
  recognizeScopes,
  verifiedDpopProof,
  verifiedResourceProof,
  authenticateClient,
  ownRouteContext,
  signedIntrospection,
} from '../../src/oauth/internals.js';

/**
 * Every oidc-provider internal Arbiter relies on (src/oauth/internals.ts), checked on its own so
 * that an upgrade which moves or changes one fails here, loudly and by name, rather than as a
 * puzzling protocol failure elsewhere. See docs/oidc-provider-internals.md.
 */
describe('oidc-provider internals used by Arbiter (upgrade guard)', function () {
  const provider = new Provider('http://127.0.0.1:1', {
    features: { richAuthorizationRequests: { enabled: true, types: {} }, clientCredentials: { enabled: true } },
  });

  it('is the oidc-provider version these uses were written against (9.13.x)', function () {
    const { version } = createRequire(import.meta.url)('oidc-provider/package.json') as { version: string };
    expect(version, 'review src/oauth/internals.ts and docs/oidc-provider-internals.md, then update this pin').to.match(
      /^9\.13\./,
    );
  });

  it('keeps the configured scopes in a Set that recognizeScopes extends', function () {
    expect(knownScopes(provider)).to.be.instanceOf(Set);
    expect(knownScopes(provider).has('openid')).to.equal(true);
    recognizeScopes(provider, ['arbiter-upgrade-probe']);
    expect(knownScopes(provider).has('arbiter-upgrade-probe')).to.equal(true);
  });

  it("reads a client's RAR types as unrestricted once every client may ask for every type", async function () {
    const rar = { enabled: true, types: { 'urn:arbiter:probe': { validate: () => undefined } } };
    const other = new Provider('http://127.0.0.1:3', { features: { richAuthorizationRequests: rar as never } });
    const metadata = { client_id: 'probe', client_secret: 'stored', redirect_uris: ['https://probe.example/cb'] };
    const Client = other.Client as unknown as new (metadata: object) => { authorizationDetailsTypes?: string[] };
    expect(new Client(metadata).authorizationDetailsTypes, "the library's default: no type").to.deep.equal([]);
    everyClientMayAskForEveryType(other);
    expect(new Client(metadata).authorizationDetailsTypes).to.equal(undefined);
    // What oidc-provider's RAR check (lib/shared/check_rar.js) reads: undefined restricts nothing.
    const source = await readFile(
      createRequire(import.meta.url).resolve('oidc-provider/lib/shared/check_rar.js'),
      'utf8',
    );
    expect(source).to.contain('client.authorizationDetailsTypes?.includes(detail.type) === false');
  });

  it('finds tokens by value, and answers undefined for an unknown one', async function () {
    expect(findTokenByValue).to.be.a('function');
    expect(await findTokenByValue(provider, 'no-such-token')).to.equal(undefined);
  });

  it('keeps no record of a JWT access token (RFC 9068) of its own: Arbiter keeps one under its jti', async function () {
    const api = 'https://jwt.probe.example/';
    const jwtProvider = new Provider('http://127.0.0.1:4', {
      clients: [{ client_id: 'probe', client_secret: 'stored', redirect_uris: ['https://probe.example/cb'] }],
      features: {
        resourceIndicators: {
          enabled: true,
          getResourceServerInfo: () => ({ scope: 'read', accessTokenFormat: 'jwt' }),
        },
      },
    });
    const client = await jwtProvider.Client.find('probe');
    const token = new jwtProvider.AccessToken({
      client,
      accountId: 'alice',
      scope: 'read',
      resourceServer: new jwtProvider.ResourceServer(api, { scope: 'read', accessTokenFormat: 'jwt' }),
    } as never);
    const value = await token.save();
    expect(value.split('.'), 'a JWT').to.have.length(3);
    // oidc-provider 9 keeps no record of a JWT access token ("issued", never "saved"): a record kept under its jti is the issuer's to store.
    expect(await findTokenByValue(jwtProvider, token.jti)).to.equal(undefined);
  });

  it('authenticates a client and signs a JWT introspection response in a context of its own (Arbiter-answered routes)', async function () {
    const own = new Provider('http://127.0.0.1:5', {
      clients: [{ client_id: 'probe', client_secret: 'stored', redirect_uris: ['https://probe.example/cb'] }],
      features: { introspection: { enabled: true }, jwtIntrospection: { enabled: true } },
    });
    const request = (authorization: string) => {
      const req = new IncomingMessage(new Socket());
      Object.assign(req, { headers: { authorization }, method: 'POST', url: '/token/introspection' });
      const ctx = own.createContext(req, new ServerResponse(req));
      return ownRouteContext(own, ctx as never, 'introspection');
    };
    const ctx = request(`Basic ${Buffer.from('probe:stored').toString('base64')}`);
    const client = await authenticateClient(ctx, { token: 'x' }, ['token']);
    expect(client.clientId).to.equal('probe');
    expect(ctx.oidc.params?.token).to.equal('x');
    const refused = await authenticateClient(request(`Basic ${Buffer.from('probe:wrong').toString('base64')}`), {}, [])
      .then(() => undefined)
      .catch((caught: unknown) => caught);
    expect(refused).to.include({ error: 'invalid_client', statusCode: 401 });
    const jwt = (await signedIntrospection(own, ctx, client.clientId, { active: false }))!;
    expect(await signedIntrospection(own, ctx, 'no-such-client', {})).to.equal(undefined);
    const [header, payload] = jwt
      .split('.')
      .slice(0, 2)
      .map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()));
    expect(header).to.include({ typ: 'token-introspection+jwt', alg: 'RS256' });
    expect(payload).to.include({ aud: 'probe', iss: 'http://127.0.0.1:5' });
    expect(payload.token_introspection).to.deep.equal({ active: false });
  });

  it("keeps only the given parameters in /token's params, on a provider's own OIDCContext class; other routes keep every allowed one", async function () {
    const clients = [{ client_id: 'probe', client_secret: 'stored', redirect_uris: ['https://probe.example/cb'] }];
    const own = new Provider('http://127.0.0.1:6', { clients });
    const other = new Provider('http://127.0.0.1:7', { clients });
    givenTokenParametersOnly(own);
    const paramsAt = async (target: Provider, route: string) => {
      const req = new IncomingMessage(new Socket());
      const authorization = `Basic ${Buffer.from('probe:stored').toString('base64')}`;
      Object.assign(req, { headers: { authorization }, method: 'POST', url: '/token' });
      const ctx = ownRouteContext(target, target.createContext(req, new ServerResponse(req)) as never, route);
      const form = { grant_type: 'client_credentials', scope: 'read', unlisted: 'x' };
      await authenticateClient(ctx, form, ['grant_type', 'scope', 'code', 'refresh_token', 'resource']);
      return ctx.oidc.params as { toPlainObject(): object };
    };
    const atToken = await paramsAt(own, 'token');
    expect(Object.keys(atToken)).to.have.members(['grant_type', 'scope']);
    expect(atToken.toPlainObject(), "still oidc-provider's Params").to.deep.equal({
      grant_type: 'client_credentials',
      scope: 'read',
    });
    expect(Object.keys(await paramsAt(own, 'introspection')), 'another route').to.include('code');
    expect(Object.keys(await paramsAt(other, 'token')), 'another provider').to.include('code');
    // Why: /token assembles every registered grant's parameters, then walks and prunes them (lib/actions/token.js).
    const source = await readFile(createRequire(import.meta.url).resolve('oidc-provider/lib/actions/token.js'), 'utf8');
    expect(source).to.contain('...grantTypeParams.get(undefined),');
    expect(source).to.contain('delete ctx.oidc.params[key];');
  });

  it("takes a client assertion's audiences from OIDCContext.clientJwtAuthExpectedAudience, which assertionAudiencesAt replaces on a provider of its own", async function () {
    const own = new Provider('http://127.0.0.1:8');
    const other = new Provider('http://127.0.0.1:9');
    assertionAudiencesAt(own, ['https://auth.example.com']);
    const audiencesAt = (target: Provider) => {
      const req = new IncomingMessage(new Socket());
      Object.assign(req, { headers: { host: 'other-as.example' }, method: 'POST', url: '/token' });
      const ctx = ownRouteContext(target, target.createContext(req, new ServerResponse(req)) as never, 'token');
      return [
        ...(ctx.oidc as unknown as { clientJwtAuthExpectedAudience(): Set<string> }).clientJwtAuthExpectedAudience(),
      ];
    };
    expect(audiencesAt(own)).to.have.members(['http://127.0.0.1:8', 'https://auth.example.com/token']);
    expect(audiencesAt(other), 'another provider: the Host header').to.include('http://other-as.example/token');
    const source = await readFile(
      createRequire(import.meta.url).resolve('oidc-provider/lib/shared/jwt_client_auth.js'),
      'utf8',
    );
    expect(source).to.contain('ctx.oidc.clientJwtAuthExpectedAudience()');
  });

  it('lets the client secret comparison be replaced on a provider of its own', async function () {
    const other = new Provider('http://127.0.0.1:2', {});
    compareClientSecretsWith(
      other,
      async (clientId, presented, stored) => clientId === 'probe' && presented === `hashed:${stored}`,
    );
    const client = new (other.Client as unknown as new (metadata: object) => unknown)({
      client_id: 'probe',
      client_secret: 'stored',
      redirect_uris: ['https://probe.example/cb'],
    }) as { compareClientSecret(value: string): Promise<boolean> };
    expect(await client.compareClientSecret('hashed:stored')).to.equal(true);
    expect(await client.compareClientSecret('stored')).to.equal(false);
    const untouched = new (provider.Client as unknown as new (metadata: object) => unknown)({
      client_id: 'probe',
      client_secret: 'stored',
      redirect_uris: ['https://probe.example/cb'],
    }) as { compareClientSecret(value: string): Promise<boolean> };
    expect(await untouched.compareClientSecret('stored'), 'another provider keeps its own comparison').to.equal(true);
  });

  it('checks replays through the static ReplayDetection.unique of a provider of its own, which atomicReplayDetection replaces', async function () {
    const other = new Provider('http://127.0.0.1:3', {});
    const stored = new Map<string, number>();
    atomicReplayDetection(other, async (id, _payload, expiresAt) => {
      if (stored.has(id)) return false;
      stored.set(id, expiresAt);
      return true;
    });
    const unique = (other.ReplayDetection as unknown as { unique: (...args: unknown[]) => Promise<boolean> }).unique;
    const exp = Math.floor(Date.now() / 1000) + 60;
    expect(await unique('client', 'jti-1', exp)).to.equal(true);
    expect(await unique('client', 'jti-1', exp)).to.equal(false);
    expect(await unique('other-client', 'jti-1', exp)).to.equal(true);
    // Found 2026-11-29: the two were joined without a separator, so client "ab" with jti "c" was "a" with "bc".
    expect(await unique('ab', 'c', exp)).to.equal(true);
    expect(await unique('a', 'bc', exp), 'another client and jti, however they join').to.equal(true);
    expect(Math.min(...stored.values()), 'kept a window past the exp oidc-provider gives').to.equal((exp + 300) * 1000);
    expect(
      (provider.ReplayDetection as unknown as { unique: unknown }).unique,
      'another provider keeps its own check',
    ).not.to.equal(unique);
    const source = await readFile(
      createRequire(import.meta.url).resolve('oidc-provider/lib/helpers/validate_dpop.js'),
      'utf8',
    );
    expect(source, 'the DPoP replay check still calls it').to.contain('provider.ReplayDetection.unique(');
  });

  it("verifies a request's DPoP proof with oidc-provider's own helper (undefined without one, invalid_dpop_proof for a bad one)", async function () {
    const dpopProvider = new Provider('http://127.0.0.1:3', { features: { dPoP: { enabled: true } } });
    const context = (dpop?: string) => {
      const ctx = dpopProvider.createContext(
        { headers: dpop ? { dpop } : {}, method: 'POST', url: '/token', socket: {} } as never,
        {} as never,
      ) as any;
      ctx.oidc = {
        provider: dpopProvider,
        client: { clientId: 'probe' },
        route: 'token',
        urlFor: () => 'http://127.0.0.1:3/token',
      };
      return ctx;
    };
    expect(await verifiedDpopProof(dpopProvider, context())).to.equal(undefined);
    const error = await verifiedDpopProof(dpopProvider, context('not-a-jwt')).catch((caught: unknown) => caught);
    expect(error).to.have.property('error', 'invalid_dpop_proof');
  });

  it("verifies the DPoP proof of a request to one of Arbiter's APIs with the same helper, its URL and the token's ath, replay counted", async function () {
    const dpopProvider = new Provider('http://127.0.0.1:4', { features: { dPoP: { enabled: true } } });
    const pair = await generateKeyPair('ES256');
    const jwk = await exportJWK(pair.publicKey);
    const url = 'http://127.0.0.1:4/resource_registration/resource';
    const ath = createHash('sha256').update('the-token').digest('base64url');
    const proof = await new SignJWT({
      htm: 'GET',
      htu: url,
      jti: randomUUID(),
      iat: Math.floor(Date.now() / 1000),
      ath,
    })
      .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk })
      .sign(pair.privateKey);
    const request = (dpop?: string) => ({
      method: 'GET',
      get: (field: string) => (field.toLowerCase() === 'dpop' ? (dpop ?? '') : ''),
      set: () => undefined,
    });
    const presented = { accessToken: 'the-token', clientId: 'probe', url };
    expect(await verifiedResourceProof(dpopProvider, request(), presented)).to.equal(undefined);
    const verified = await verifiedResourceProof(dpopProvider, request(proof), presented);
    expect(verified?.thumbprint).to.equal(await calculateJwkThumbprint(jwk));
    const replayed = await verifiedResourceProof(dpopProvider, request(proof), presented).catch(
      (caught: unknown) => caught,
    );
    expect(replayed).to.have.property('error', 'invalid_dpop_proof');
    const elsewhere = await verifiedResourceProof(dpopProvider, request(proof), { ...presented, url: `${url}x` }).catch(
      (caught: unknown) => caught,
    );
    expect(elsewhere).to.have.property('error', 'invalid_dpop_proof');
  });

  it("sets no nonce on an ID token of a refresh_token grant, on a provider's own IdToken class only", async function () {
    const other = new Provider('http://127.0.0.1:4', {});
    noNonceInRefreshedIdTokens(other);
    type Token = { extra: Record<string, unknown>; set(key: string, value: unknown): void };
    const idToken = (Model: unknown, grantType: string): Token => {
      const token = new (Model as new (claims: object, options: object) => Token)(
        {},
        { ctx: { oidc: { params: { grant_type: grantType } } }, client: {} },
      );
      token.set('nonce', 'n-0S6');
      token.set('sid', 'session');
      return token;
    };
    expect(idToken(other.IdToken, 'refresh_token').extra).to.deep.equal({ sid: 'session' });
    expect(idToken(other.IdToken, 'authorization_code').extra).to.deep.equal({ nonce: 'n-0S6', sid: 'session' });
    expect(idToken(provider.IdToken, 'refresh_token').extra.nonce, 'another provider keeps it').to.equal('n-0S6');
    // What oidc-provider's refresh handler issues with (lib/helpers/grant_common.js): the nonce, through set().
    const source = await readFile(
      createRequire(import.meta.url).resolve('oidc-provider/lib/helpers/grant_common.js'),
      'utf8',
    );
    expect(source).to.contain("token.set('nonce', source.nonce);");
  });

  it("makes a client's fresh jwks_uri set stale for an unfamiliar kid, once per interval; verification then fetches it again", async function () {
    refetchClientKeysOnUnfamiliarKid();
    type KeyStore = {
      jwksUri?: string;
      freshUntil?: number;
      fresh(): boolean;
      selectForVerify(options: object): unknown[];
    };
    const Client = provider.Client as unknown as new (metadata: object) => { asymmetricKeyStore: KeyStore };
    const keystore = new Client({
      client_id: 'rotating-rp',
      token_endpoint_auth_method: 'private_key_jwt',
      jwks_uri: 'https://rp.example.test/jwks',
      redirect_uris: ['https://rp.example.test/cb'],
    }).asymmetricKeyStore;
    expect(keystore.jwksUri).to.equal('https://rp.example.test/jwks');
    keystore.freshUntil = Math.floor(Date.now() / 1000) + 60;
    expect(keystore.fresh(), 'fetched a moment ago').to.equal(true);

    expect(keystore.selectForVerify({ alg: 'RS256', kid: 'unfamiliar' })).to.deep.equal([]);
    expect(keystore.fresh(), 'an unfamiliar kid').to.equal(false);
    keystore.freshUntil = Math.floor(Date.now() / 1000) + 60;
    keystore.selectForVerify({ alg: 'RS256', kid: 'another' });
    expect(keystore.fresh(), 'not again within the interval').to.equal(true);
    // What oidc-provider's verification does with a set that is not fresh (lib/helpers/jwt.js): fetch it, try again.
    const source = await readFile(createRequire(import.meta.url).resolve('oidc-provider/lib/helpers/jwt.js'), 'utf8');
    expect(source).to.match(/keystore\.fresh\(\)\) \{\s+throw err;\s+\}\s+await keystore\.refresh\(\);/);
  });

  for (const grantType of ['client_credentials', 'authorization_code', 'refresh_token'] as const) {
    it(`exposes the built-in ${grantType} handler with its parameters`, function () {
      const grant = builtInGrant(provider, grantType);
      expect(grant.grantType).to.equal(grantType);
      expect(grant.handle).to.be.a('function');
      expect(grant.parameters).to.be.instanceOf(Set);
      const own = { client_credentials: 'scope', authorization_code: 'code', refresh_token: 'refresh_token' }[
        grantType
      ];
      expect([...grant.parameters]).to.include(own);
    });
  }
  it("finds JWT access tokens through the models' find, which oidc-provider's lookups call", async function () {
    const own = new Provider('http://127.0.0.1:4', { features: { clientCredentials: { enabled: true } } });
    const now = Math.floor(Date.now() / 1000);
    findJwtAccessTokensToo(own, async (model, value) =>
      value === 'probe.jwt.value' && model.name === 'ClientCredentials'
        ? { jti: 'probe-jti', kind: 'ClientCredentials', clientId: 'probe', iat: now, exp: now + 60 }
        : undefined,
    );
    const found = await findTokenByValue(own, 'probe.jwt.value', 'access_token');
    expect(found).to.include({ kind: 'ClientCredentials', jti: 'probe-jti', clientId: 'probe' });
    expect(await findTokenByValue(own, 'no-such-token')).to.equal(undefined);
    const read = (file: string) =>
      readFile(createRequire(import.meta.url).resolve(`oidc-provider/lib/${file}`), 'utf8');
    // What token/jwt-access-tokens.ts relies on: a record marked format "jwt" is no opaque token, and
    // /revoke and /introspect refuse a JWT before any lookup (so the JWT's jti stands in for it).
    expect(await read('models/formats/opaque.js')).to.contain("('format' in stored) && stored.format !== 'opaque'");
    expect(await read('shared/reject_structured_tokens.js')).to.contain('decodeProtectedHeader(params.token)');
    expect(await read('models/formats/jwt.js')).to.contain('customizer(als.getStore(), token, structuredToken)');
  });

  it('exposes the built-in device code handler (RFC 8628) with its parameter', function () {
    const grant = builtInGrant(provider, 'device_code');
    expect(grant.grantType).to.equal('urn:ietf:params:oauth:grant-type:device_code');
    expect(grant.handle).to.be.a('function');
    expect([...grant.parameters]).to.include('device_code');
  });
});
