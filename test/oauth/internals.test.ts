import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { expect } from 'chai';
import Provider from 'oidc-provider';
import {
  builtInGrant,
  everyClientMayAskForEveryType,
  compareClientSecretsWith,
  findTokenByValue,
  jtiOfOwnAccessTokenJwt,
  knownScopes,
  recognizeScopes,
  verifiedDpopProof,
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

  it('finds a JWT access token (RFC 9068) of this provider by its verified jti, and no forged one', async function () {
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
    const jti = await jtiOfOwnAccessTokenJwt(jwtProvider, value);
    expect(jti).to.equal(token.jti);
    // oidc-provider 9 keeps no record of a JWT access token ("issued", never "saved"): a record kept under its jti is the issuer's to store.
    expect(await findTokenByValue(jwtProvider, jti!)).to.equal(undefined);
    const [header, , signature] = value.split('.');
    const forged = `${header}.${Buffer.from(JSON.stringify({ jti, iss: 'http://127.0.0.1:4' })).toString('base64url')}.${signature}`;
    expect(await jtiOfOwnAccessTokenJwt(jwtProvider, forged)).to.equal(undefined);
    expect(await jtiOfOwnAccessTokenJwt(provider, value), "another provider's keys").to.equal(undefined);
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
});
