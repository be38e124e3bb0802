import { expect } from 'chai';
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as client from 'openid-client';
import { createOidcAdapter } from '../../adapters/oidc/index.js';
import { OIDC_COLLECTION } from '../../adapters/oidc/collection.js';
import { openArbiterStore as openStore } from '../../src/collections.js';
import type { Store } from '../../src/store/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  passDevIdpForms,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { clientCredentials, confidentialClient, eventually, postForm, updateOauthData } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * A copy of the database file must not hand out live tokens: access tokens (user and
 * client_credentials), refresh tokens (before and after rotation), authorization codes,
 * registration access tokens and session ids are stored as SHA-256 digests only, and the
 * server still finds them by digest. The file is read the way an attacker with a copy would:
 * through SQLite (which also sees the WAL) and as raw bytes of the .db, -wal and -shm files.
 */
describe('Tokens at rest', function () {
  const REDIRECT_URI = 'http://127.0.0.1:1/rp/callback';
  const API = 'https://rest.example.test/';
  const insecure = { execute: [client.allowInsecureRequests] };
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let spa: client.Configuration;
  let spaClientId: string;
  let rsSecret: string;

  before(async function () {
    // Its own server: the test reads its database file and opens registration in its policy data.
    server = await readyServer();
    idp = await startRegisteredDevIdp(server);
    spaClientId = (await registerPublicClient(server, REDIRECT_URI)).clientId;
    spa = await client.discovery(new URL(server.config.issuer), spaClientId, undefined, client.None(), insecure);
    // A resource server that may introspect, with a client_credentials token of its own.
    rsSecret = await confidentialClient(server, 'rest-rs', { scopes: ['introspection'] });
    const rsClient = (await server.admin('GET', '/clients/rest-rs')).body;
    expect(
      (await server.admin('POST', '/resource-servers', { resourceIndicator: API, clientId: rsClient.id })).status,
    ).to.equal(201);
  });

  after(async function () {
    await idp?.close();
    await server?.close();
  });

  /** Every table and column of the store, as SQLite answers them (WAL content included), one string per row. */
  function rowsOfTheStore(): string[] {
    const db = new Database(storeFile(server), { readonly: true, fileMustExist: true });
    try {
      const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as { name: string }[];
      return tables.flatMap(({ name }) =>
        (db.prepare(`SELECT * FROM "${name}"`).all() as Record<string, unknown>[]).map(
          (row) => `${name}: ${JSON.stringify(row)}`,
        ),
      );
    } finally {
      db.close();
    }
  }

  /** The bytes of the database file and of its -wal and -shm files, as a copy of the directory would have them. */
  function bytesOfTheStore(): Buffer {
    const file = storeFile(server);
    return Buffer.concat(
      [file, `${file}-wal`, `${file}-shm`].filter((path) => existsSync(path)).map((path) => readFileSync(path)),
    );
  }

  it('stores no access token, refresh token, code, registration access token or session id, and still finds each by its digest', async function () {
    // client_credentials
    const cc = await clientCredentials(server, 'rest-rs', rsSecret, { scope: 'introspection' });
    expect(cc.status, JSON.stringify(cc.body)).to.equal(200);
    const ccToken: string = cc.body.access_token;

    // authorization_code, through a sign-in at the dev IdP
    const agent = new FetchUserAgent();
    const codeVerifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const authorizationUrl = client.buildAuthorizationUrl(spa, {
      redirect_uri: REDIRECT_URI,
      scope: 'openid profile email',
      state,
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
    });
    const loginPage = await agent.navigate(authorizationUrl, arrivingAt(REDIRECT_URI));
    const redirect = (await passDevIdpForms(agent, loginPage, 'alice', arrivingAt(REDIRECT_URI))).url;
    const code = redirect.searchParams.get('code')!;
    expect(code).to.be.a('string').and.not.empty;
    const arbiterHost = new URL(server.config.issuer).hostname; // the dev IdP has a _session cookie of its own
    const sessionId = cookiesOf(agent).find(
      (cookie) => cookie.name === '_session' && cookie.host === arbiterHost,
    )?.value;
    expect(sessionId, 'the browser has an Arbiter session').to.be.a('string').and.not.empty;

    const tokens = await client.authorizationCodeGrant(spa, redirect, {
      pkceCodeVerifier: codeVerifier,
      expectedState: state,
    });
    const accessToken = tokens.access_token;
    const firstRefreshToken = tokens.refresh_token!;
    expect(firstRefreshToken).to.be.a('string');

    // refresh rotation (a public client gets a new refresh token on every use)
    const rotated = await client.refreshTokenGrant(spa, firstRefreshToken);
    const secondRefreshToken = rotated.refresh_token!;
    expect(secondRefreshToken).to.be.a('string').and.not.equal(firstRefreshToken);

    // a registration access token (RFC 7591), once policy data opens registration
    await updateOauthData(server, (data) => {
      data.public_client_policy.enabled = true;
    });
    let registrationAccessToken: string | undefined;
    await eventually(async () => {
      const response = await server.request('/register', {
        method: 'POST',
        json: {
          redirect_uris: ['https://registered.example.test/cb'],
          client_name: 'Registered',
          token_endpoint_auth_method: 'none',
        },
      });
      const body = (await response.json()) as Record<string, unknown>;
      if (response.status !== 201) return false;
      registrationAccessToken = body.registration_access_token as string;
      return true;
    });
    expect(registrationAccessToken).to.be.a('string').and.not.empty;

    // Everything issued still works: found by digest.
    const introspect = (token: string) =>
      postForm(server, '/introspect', { token }, { Authorization: `Bearer ${ccToken}` });
    const introspected = await introspect(rotated.access_token);
    expect(introspected.status, JSON.stringify(introspected.body)).to.equal(200);
    expect(introspected.body).to.include({ active: true, client_id: spaClientId, sub: 'alice' });
    expect(
      (await introspect(secondRefreshToken)).body.active,
      'the rotated refresh token introspects as active',
    ).to.equal(true);
    const userinfo = await server.request('/userinfo', {
      headers: { Authorization: `Bearer ${rotated.access_token}` },
    });
    expect(userinfo.status).to.equal(200);
    expect(((await userinfo.json()) as { sub: string }).sub).to.equal('alice');
    const again = await client.refreshTokenGrant(spa, secondRefreshToken);
    expect(again.access_token).to.be.a('string');

    const issued: Record<string, string> = {
      'client_credentials access token': ccToken,
      'authorization code': code,
      'access token': accessToken,
      'first refresh token': firstRefreshToken,
      'rotated refresh token': secondRefreshToken,
      'access token of the rotation': rotated.access_token,
      'access token of the second refresh': again.access_token,
      'refresh token of the second refresh': again.refresh_token!,
      'registration access token': registrationAccessToken!,
      'session id (session cookie)': sessionId!,
    };

    const rows = rowsOfTheStore();
    const bytes = bytesOfTheStore();
    // The reads do see the store: the client's id is in it.
    expect(
      rows.some((row) => row.includes(spaClientId)),
      'SQLite shows the store content',
    ).to.equal(true);
    expect(bytes.includes(spaClientId), 'the raw bytes hold the store content').to.equal(true);

    const leaks: string[] = [];
    for (const [what, value] of Object.entries(issued)) {
      expect(value, what).to.be.a('string').with.length.greaterThan(15);
      const row = rows.find((candidate) => candidate.includes(value));
      if (row) leaks.push(`${what}, readable through SQLite in ${row.slice(0, 200)}`);
      else if (bytes.includes(value)) leaks.push(`${what}, in the raw bytes of the store's files`);
    }
    expect(leaks, 'issued values found in the store').to.deep.equal([]);
    // Stored by digest instead: the rotated refresh token's SHA-256 is its key.
    const digest = createHash('sha256').update(secondRefreshToken).digest('base64url');
    expect(
      rows.some((row) => row.includes(digest)),
      'the refresh token is stored by its SHA-256 digest',
    ).to.equal(true);

    // Consumption works by digest too (checked last: a replay revokes the grant and deletes its tokens).
    const replayed = await postForm(server, '/token', {
      grant_type: 'refresh_token',
      refresh_token: firstRefreshToken,
      client_id: spaClientId,
    });
    expect(replayed.body.error, 'a rotated refresh token is refused').to.equal('invalid_grant');
    const reused = await postForm(server, '/token', {
      grant_type: 'authorization_code',
      code,
      client_id: spaClientId,
      code_verifier: codeVerifier,
      redirect_uri: REDIRECT_URI,
    });
    expect(reused.body.error, 'a used code is refused').to.equal('invalid_grant');
  });
});

describe('The oidc-provider adapter at rest', function () {
  let store: Store;
  const sha256 = (value: string) => createHash('sha256').update(value).digest('base64url');
  const inFuture = () => Date.now() + 60_000;

  beforeEach(async function () {
    store = await openStore('sqlite::memory:');
  });
  afterEach(async function () {
    await store.close();
  });

  const storedDocs = async () => store.collection(OIDC_COLLECTION, 'tenant-a').find();

  it('keys an artefact by the digest of its value, keeps no jti, and gives it back on find', async function () {
    const Adapter = createOidcAdapter(store, 'tenant-a');
    const tokens = new Adapter('RefreshToken');
    await tokens.upsert(
      'rt-value-0123456789',
      { jti: 'rt-value-0123456789', kind: 'RefreshToken', grantId: 'g1', exp: 1 },
      60,
    );

    const doc = (await storedDocs())[0]!;
    expect(doc.id).to.equal(`RefreshToken:${sha256('rt-value-0123456789')}`);
    expect(JSON.stringify(doc)).not.to.contain('rt-value-0123456789');
    expect(await tokens.find('rt-value-0123456789')).to.deep.include({ jti: 'rt-value-0123456789', grantId: 'g1' });
    expect(await tokens.find(sha256('rt-value-0123456789')), 'the digest is no token').to.equal(undefined);

    await tokens.consume('rt-value-0123456789');
    expect((await tokens.find('rt-value-0123456789'))?.consumed).to.be.a('number');
    await tokens.revokeByGrantId('g1');
    expect(await tokens.find('rt-value-0123456789')).to.equal(undefined);
  });

  it('ends the grant of a code or refresh token found used already at consume (a request that raced the first use)', async function () {
    const Adapter = createOidcAdapter(store, 'tenant-a');
    const [grants, refreshTokens, accessTokens] = ['Grant', 'RefreshToken', 'AccessToken'].map(
      (model) => new Adapter(model),
    );
    await grants!.upsert('g2', { jti: 'g2', kind: 'Grant', exp: 1 }, 60);
    await refreshTokens!.upsert(
      'rt-raced-0123456789',
      { jti: 'rt-raced-0123456789', kind: 'RefreshToken', grantId: 'g2', exp: 1 },
      60,
    );
    await accessTokens!.upsert(
      'at-winner-0123456789',
      { jti: 'at-winner-0123456789', kind: 'AccessToken', grantId: 'g2', exp: 1 },
      60,
    );
    await refreshTokens!.consume('rt-raced-0123456789');
    expect(await accessTokens!.find('at-winner-0123456789'), 'the first use ends nothing').to.not.equal(undefined);
    const second = await refreshTokens!.consume('rt-raced-0123456789').catch((error: unknown) => error);
    expect(second).to.have.property('error', 'invalid_grant');
    // Was: refused, and the grant, with what the first use issued, left alive (RFC 6749 §4.1.2, RFC 9700 §4.14.2).
    expect(await grants!.find('g2'), 'the grant').to.equal(undefined);
    expect(await accessTokens!.find('at-winner-0123456789'), "the first use's token").to.equal(undefined);
  });

  it('finds a session by uid without its id, and keeps the session id out of interactions', async function () {
    const Adapter = createOidcAdapter(store, 'tenant-a');
    await new Adapter('Session').upsert(
      'session-cookie-value',
      { jti: 'session-cookie-value', uid: 'session-uid', accountId: 'alice', kind: 'Session' },
      60,
    );
    await new Adapter('Interaction').upsert(
      'interaction-uid',
      {
        jti: 'interaction-uid',
        kind: 'Interaction',
        session: { accountId: 'alice', uid: 'session-uid', cookie: 'session-cookie-value' },
      },
      60,
    );

    const docs = await storedDocs();
    expect(docs).to.have.length(2);
    expect(JSON.stringify(docs)).not.to.contain('session-cookie-value');
    const byUid = await new Adapter('Session').findByUid('session-uid');
    expect(byUid).to.deep.include({ accountId: 'alice', uid: 'session-uid' });
    expect(byUid).not.to.have.property('jti');
    expect(await new Adapter('Session').find('session-cookie-value')).to.deep.include({
      jti: 'session-cookie-value',
      accountId: 'alice',
    });
    expect((await new Adapter('Interaction').find('interaction-uid'))?.session).to.deep.equal({
      accountId: 'alice',
      uid: 'session-uid',
    });
  });

  it('rewrites artefacts stored before values were hashed under their digest, on first use', async function () {
    await store.collection(OIDC_COLLECTION, 'tenant-a').insert({
      id: 'AccessToken:legacy-access-token-value',
      model: 'AccessToken',
      payload: { jti: 'legacy-access-token-value', kind: 'AccessToken', grantId: 'g2' },
      grantId: 'g2',
      uid: null,
      userCode: null,
      expiresAt: inFuture(),
    });
    const Adapter = createOidcAdapter(store, 'tenant-a');
    expect(await new Adapter('AccessToken').find('legacy-access-token-value')).to.deep.include({
      jti: 'legacy-access-token-value',
      grantId: 'g2',
    });
    const docs = await store.collection(OIDC_COLLECTION, 'tenant-a').find();
    expect(docs.map((doc) => doc.id)).to.deep.equal([`AccessToken:${sha256('legacy-access-token-value')}`]);
    expect(JSON.stringify(docs)).not.to.contain('legacy-access-token-value');
  });

  it("keeps a device code's first answer: a copy read before it and saved after changes nothing (two approvals at once)", async function () {
    const Adapter = createOidcAdapter(store, 'tenant-a');
    const codes = new Adapter('DeviceCode');
    const pending = { jti: 'dc-raced-0123456789', kind: 'DeviceCode', userCode: 'BCDFGHJL', clientId: 'tv', exp: 1 };
    await codes.upsert('dc-raced-0123456789', pending, 60);
    const readByBob = await codes.findByUserCode!('BCDFGHJL');
    await codes.upsert(readByBob!.jti!, { ...readByBob!, accountId: 'alice' }, 60);
    await codes.consume('dc-raced-0123456789');
    // Bob's page, answered after alice's approval and the device's redemption, saves what it read.
    await codes.upsert(readByBob!.jti!, { ...readByBob!, accountId: 'bob' }, 60);
    const stored = await codes.find('dc-raced-0123456789');
    // Was: accountId bob and no longer consumed, so that the device could redeem it a second time.
    expect(stored).to.include({ accountId: 'alice' });
    expect(stored?.consumed).to.be.a('number');
  });

  it('keeps neither a device code nor its user code, finds it by either, and saves it again by reference', async function () {
    const Adapter = createOidcAdapter(store, 'tenant-a');
    const codes = new Adapter('DeviceCode');
    const payload = { jti: 'dc-value-0123456789', kind: 'DeviceCode', userCode: 'BCDFGHJK', clientId: 'tv', exp: 1 };
    await codes.upsert('dc-value-0123456789', payload, 60);

    expect(JSON.stringify(await storedDocs()))
      .not.to.contain('dc-value-0123456789')
      .and.not.to.contain('BCDFGHJK');
    const byUserCode = await codes.findByUserCode!('BCDFGHJK');
    expect(byUserCode).to.include({ userCode: 'BCDFGHJK', clientId: 'tv' });
    const reference = byUserCode!.jti!;
    expect(reference).to.equal(`digest:${sha256('dc-value-0123456789')}`);
    await codes.upsert(reference, { ...byUserCode!, accountId: 'alice' }, 60);
    expect(await storedDocs()).to.have.length(1);
    expect(JSON.stringify(await storedDocs())).not.to.contain('BCDFGHJK');
    expect(await codes.find('dc-value-0123456789')).to.include({ jti: 'dc-value-0123456789', accountId: 'alice' });
    expect(await codes.findByUserCode!('BCDFGHJX'), 'another user code').to.equal(undefined);
  });
});

function storeFile(server: TestServer): string {
  expect(server.config.storeUrl.startsWith('sqlite:')).to.equal(true);
  return server.config.storeUrl.slice('sqlite:'.length);
}

/** The user agent's cookie jar (kept private by FetchUserAgent; the session cookie is what this test needs). */
function cookiesOf(agent: FetchUserAgent): { host: string; name: string; value: string }[] {
  return (agent as unknown as { cookies: { host: string; name: string; value: string }[] }).cookies;
}
