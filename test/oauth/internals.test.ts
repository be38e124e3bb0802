import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import Provider from 'oidc-provider';
import {
  builtInGrant,
  everyClientMayAskForEveryType,
  compareClientSecretsWith,
  findTokenByValue,
  knownScopes,
  recognizeScopes,
  verifiedDpopProof,
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

  it('exposes the built-in device code handler (RFC 8628) with its parameter', function () {
    const grant = builtInGrant(provider, 'device_code');
    expect(grant.grantType).to.equal('urn:ietf:params:oauth:grant-type:device_code');
    expect(grant.handle).to.be.a('function');
    expect([...grant.parameters]).to.include('device_code');
  });
});
