import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import * as client from 'openid-client';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  jwtVerify,
  type JSONWebKeySet,
} from 'jose';
import { openArbiterStore } from '../../src/collections.js';
import { MIGRATIONS } from '../../src/migrations.js';
import { PROVIDER_SECRETS_COLLECTION } from '../../src/oauth/keys.js';
import { DEFAULT_TENANT, migrate, Sealer, type Store } from '../../src/store/index.js';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, startRegisteredDevIdp, type RegisteredDevIdp } from '../support/dev-idp.js';
import { eventually } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { entryPoint } from '../support/entry-point.js';

const ACME = 'keys-acme';
const GLOBEX = 'keys-globex';
const LEGACY_KID = 'kid-of-an-earlier-release';
const REDIRECT_URI = 'http://127.0.0.1:1/tenant-keys/cb';
const JWKS_PATH = '/.well-known/jwks.json';

/** The store as an earlier release left it: the default tenant's secrets in the one `current` document. */
async function storeOfAnEarlierRelease(store: Store): Promise<void> {
  await migrate(store, MIGRATIONS);
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
  const secrets = {
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: LEGACY_KID, use: 'sig', alg: 'RS256' }] },
    cookieKeys: ['an-earlier-cookie-key-0123456789abcdef'],
  };
  const sealer = await Sealer.open(store, null);
  await store.collection(PROVIDER_SECRETS_COLLECTION, DEFAULT_TENANT).insert({
    id: 'current',
    sealed: sealer.seal(JSON.stringify(secrets)),
    createdAt: new Date().toISOString(),
    revision: 0,
  });
}

const common = (some: unknown[], others: unknown[]) => some.filter((each) => others.includes(each));

/**
 * `arbiter rotate-signing-key …` against the servers' store. Not spawnSync: the servers run in this
 * process, and a blocked event loop would fire their keep-alive timers late, racing the next fetch.
 */
function rotate(env: Record<string, string>, ...args: string[]) {
  const command = [...entryPoint('cli/main'), 'rotate-signing-key', ...args];
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      command,
      { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' },
      (error, stdout, stderr) =>
        resolve({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    );
  });
}

/**
 * Issue 33, item 10: every tenant signed with the same keys, so that a relying party of client
 * `web` in one tenant accepted an ID token issued to `web` in another (the X-Tenant-Id form
 * shares the issuer). Each tenant now has keys of its own, made with it and kept in the store;
 * the default tenant keeps the keys it had.
 */
describe('Signing keys per tenant', function () {
  this.timeout(180_000);
  let dir: string;
  let env: Record<string, string>;
  let store: Store;
  let server: TestServer;
  /** A second node on the same store. */
  let other: TestServer;
  let idp: RegisteredDevIdp;

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), 'arbiter-tenant-keys-'));
    env = { STORE_URL: `sqlite:${join(dir, 'arbiter.db')}`, SIGNING_KEY_REFRESH_SECONDS: '1', TENANTS: ACME };
    store = await openArbiterStore(env.STORE_URL!);
    await storeOfAnEarlierRelease(store);
    server = await readyServer(env);
    other = await readyServer(env);
    // GLOBEX is made by the Admin API rather than configured.
    const created = await server.admin('POST', '/tenants', { id: GLOBEX });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    idp = await startRegisteredDevIdp(server, { tenantId: ACME, tenantPath: true, idpId: 'keys-idp' });
    // The same client id in both tenants, as in the probe.
    for (const tenantId of [ACME, GLOBEX]) {
      const web = await server.admin('POST', '/clients', {
        clientId: 'web',
        clientType: 'public',
        tokenEndpointAuthMethod: 'none',
        redirectUris: [REDIRECT_URI],
        scopes: ['openid'],
        tenantId,
      });
      expect(web.status, JSON.stringify(web.body)).to.equal(201);
    }
  });

  after(async function () {
    await idp?.close();
    await other?.close();
    await server?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const jwksAt = async (at: TestServer, path: string, tenant?: string) => {
    const response = await at.request(path, tenant ? { tenant } : {});
    expect(response.status, path).to.equal(200);
    return (await response.json()) as JSONWebKeySet;
  };
  /** The RS256 keys' kids (each is published again for PS256 under its own kid, src/oauth/fapi). */
  const kids = async (path: string, tenant?: string, at = server) =>
    (await jwksAt(at, path, tenant)).keys.filter((key) => key.alg !== 'PS256').map((key) => key.kid);

  /** A sign-in of `web` at acme's own issuer; its ID token. */
  async function idTokenOfAcme(): Promise<string> {
    const issuer = `${server.config.issuer}/t/${ACME}`;
    const configuration = await client.discovery(new URL(issuer), 'web', undefined, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    const codeVerifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const agent = new FetchUserAgent();
    const login = await agent.navigate(
      client.buildAuthorizationUrl(configuration, {
        redirect_uri: REDIRECT_URI,
        scope: 'openid',
        state,
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      }),
      arrivingAt(REDIRECT_URI),
    );
    const arrived = await passDevIdpForms(agent, login, 'alice', arrivingAt(REDIRECT_URI));
    const tokens = await client.authorizationCodeGrant(configuration, arrived.url, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
    });
    return tokens.id_token!;
  }

  it("publishes each tenant's own keys, disjoint from every other's, the same under its path and its X-Tenant-Id", async function () {
    const byDefault = await kids(JWKS_PATH);
    const acme = await kids(`/t/${ACME}${JWKS_PATH}`);
    const globex = await kids(`/t/${GLOBEX}${JWKS_PATH}`);
    expect(acme).to.not.be.empty;
    expect(globex).to.not.be.empty;
    expect(common(acme, globex), 'acme and globex').to.be.empty;
    expect(common(acme, byDefault), 'acme and the default tenant').to.be.empty;
    expect(common(globex, byDefault), 'globex and the default tenant').to.be.empty;
    // One tenant, two issuers (path and header): one set of keys.
    expect(await kids(JWKS_PATH, ACME)).to.deep.equal(acme);
    expect(await kids(JWKS_PATH, GLOBEX)).to.deep.equal(globex);
    // The discovery document points at them.
    const discovery = (await (await server.request(`/t/${ACME}/.well-known/openid-configuration`)).json()) as {
      jwks_uri: string;
    };
    expect(discovery.jwks_uri).to.equal(`${server.config.issuer}/t/${ACME}${JWKS_PATH}`);
  });

  it("keeps the default tenant's keys of an earlier release: the same kid as its `current` document", async function () {
    expect(await kids(JWKS_PATH)).to.deep.equal([LEGACY_KID]);
  });

  it("does not let an ID token of one tenant verify with another tenant's JWKS", async function () {
    const idToken = await idTokenOfAcme();
    const acmeIssuer = `${server.config.issuer}/t/${ACME}`;
    const { payload } = await jwtVerify(idToken, createRemoteJWKSet(new URL(`${acmeIssuer}${JWKS_PATH}`)), {
      issuer: acmeIssuer,
      audience: 'web',
    });
    expect(payload.sub).to.equal('alice');
    // Also with acme's keys fetched under X-Tenant-Id: one tenant, one set of keys.
    await jwtVerify(idToken, createLocalJWKSet(await jwksAt(server, JWKS_PATH, ACME)));
    const elsewhere: [string, JSONWebKeySet][] = [
      ['globex by its path', await jwksAt(server, `/t/${GLOBEX}${JWKS_PATH}`)],
      ['globex by X-Tenant-Id, under the shared issuer', await jwksAt(server, JWKS_PATH, GLOBEX)],
      ['the default tenant', await jwksAt(server, JWKS_PATH)],
    ];
    for (const [where, jwks] of elsewhere) {
      const refused = await jwtVerify(idToken, createLocalJWKSet(jwks)).then(
        () => null,
        (error: unknown) => error as { code?: string },
      );
      expect(refused?.code, `verified with the keys of ${where}`).to.equal('ERR_JWKS_NO_MATCHING_KEY');
    }
    expect(decodeProtectedHeader(idToken).kid).to.not.equal(LEGACY_KID);
  });

  it('makes the keys with the tenant, in the store, so that every node publishes the same ones', async function () {
    const made = await store.collection(PROVIDER_SECRETS_COLLECTION, GLOBEX).get('current');
    expect(made, "globex's keys, made when the Admin API created it").to.not.equal(null);
    expect(made!.sealed, 'sealed').to.be.a('string');
    expect(JSON.stringify(made)).to.not.match(/"d":/);
    for (const tenant of [ACME, GLOBEX])
      expect(await kids(`/t/${tenant}${JWKS_PATH}`, undefined, other), tenant).to.deep.equal(
        await kids(`/t/${tenant}${JWKS_PATH}`),
      );
    expect(await kids(JWKS_PATH, undefined, other)).to.deep.equal([LEGACY_KID]);
  });

  it("rotates one tenant's signing key with the CLI (--tenant) and leaves the others' alone, on every node", async function () {
    const before = {
      byDefault: await kids(JWKS_PATH),
      acme: await kids(`/t/${ACME}${JWKS_PATH}`),
      globex: await kids(`/t/${GLOBEX}${JWKS_PATH}`),
    };
    const run = await rotate(env, '--tenant', ACME);
    expect(run.status, run.stderr).to.equal(0);
    expect(JSON.parse(run.stdout)).to.include({ action: 'published-next', tenant: ACME });
    for (const node of [server, other])
      await eventually(async () => (await kids(`/t/${ACME}${JWKS_PATH}`, undefined, node)).length === 2);
    const acme = await kids(`/t/${ACME}${JWKS_PATH}`);
    expect(acme.slice(0, 1), 'the active key stays first').to.deep.equal(before.acme);
    expect(await kids(JWKS_PATH, ACME), 'under X-Tenant-Id too').to.deep.equal(acme);
    for (const node of [server, other]) {
      expect(await kids(JWKS_PATH, undefined, node), 'the default tenant').to.deep.equal(before.byDefault);
      expect(await kids(`/t/${GLOBEX}${JWKS_PATH}`, undefined, node), 'globex').to.deep.equal(before.globex);
    }

    const unknown = await rotate(env, '--tenant', 'keys-nobody');
    expect(unknown.status).to.equal(1);
    expect(unknown.stderr).to.match(/no tenant keys-nobody/);
    const malformed = await rotate(env, '--tenant', '../x');
    expect(malformed.status).to.equal(2);
  });
});
