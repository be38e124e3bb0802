import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { openArbiterStore } from '../../src/collections.js';
import { rotateSigningKey } from '../../src/oauth/index.js';
import { ssfStreams } from '../../src/signals/streams.js';
import { DEFAULT_TENANT, Sealer } from '../../src/store/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { clientCredentials, clientWithToken, eventually } from '../support/oauth.js';
import { freePort, readyServer, type TestServer } from '../support/server.js';
import { entryPoint } from '../support/entry-point.js';

/**
 * `arbiter <command>` against the store the servers use. Not spawnSync: a server runs in this
 * process, and a blocked event loop would fire its keep-alive timers late, racing the next fetch.
 */
async function arbiter(env: Record<string, string>, ...command: string[]) {
  const { status, stdout, stderr } = await new Promise<{ status: number | null; stdout: string; stderr: string }>(
    (resolve) =>
      execFile(
        process.execPath,
        [...entryPoint('cli/main'), ...command],
        { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' },
        (error, out, err) =>
          resolve({
            status: error ? (typeof error.code === 'number' ? error.code : null) : 0,
            stdout: out,
            stderr: err,
          }),
      ),
  );
  expect(status, stderr).to.equal(0);
  return JSON.parse(stdout) as Record<string, unknown>;
}

const base64urlKey = () => randomBytes(32).toString('base64url');

/** Servers of their own: their keys change under them. */
describe('Signing-key and sealing-key rotation', function () {
  let dir: string;
  let env: Record<string, string>;
  let server: TestServer | undefined;
  let idp: RegisteredDevIdp | undefined;

  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), 'arbiter-keys-'));
    env = { STORE_URL: `sqlite:${join(dir, 'arbiter.db')}`, SIGNING_KEY_REFRESH_SECONDS: '1' };
  });
  afterEach(async function () {
    await idp?.close();
    await server?.close();
    idp = server = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  /** The RS256 keys (each is published again for PS256 under its own kid, src/oauth/fapi). */
  const jwks = async (tenant?: string) => {
    const published = (await (await server!.request('/.well-known/jwks.json', { tenant })).json()) as JSONWebKeySet;
    return { keys: published.keys.filter((key) => key.alg !== 'PS256') };
  };
  const kids = async () => (await jwks()).keys.map((key) => key.kid);

  /** A whole sign-in through the dev IdP; the ID token of its code exchange. */
  async function idToken(spa: TestClient): Promise<string> {
    const request = await authorizationRequest(server!, spa);
    const agent = new FetchUserAgent();
    const login = await agent.navigate(request.url, arrivingAt(spa.redirectUri));
    const code = (await passDevIdpForms(agent, login, 'alice', arrivingAt(spa.redirectUri))).url.searchParams.get(
      'code',
    )!;
    const tokens = await redeemCode(server!, spa, code, request.codeVerifier);
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    return tokens.body.id_token as string;
  }
  const kidOf = (token: string) => decodeProtectedHeader(token).kid;

  it('makes one of two rotation steps at once, refusing the other: no key published is lost', async function () {
    const store = await openArbiterStore(env.STORE_URL!);
    try {
      const sealer = await Sealer.open(store, null);
      const steps = await Promise.allSettled(
        [1, 2, 3].map(() => rotateSigningKey(store, sealer, { retireAfterSeconds: 3600 })),
      );
      const made = steps.filter((step) => step.status === 'fulfilled').map((step) => step.value);
      const published = made.filter((step) => step.action === 'published-next');
      expect(published, JSON.stringify(steps)).to.have.length(1);
      for (const step of steps.filter((each) => each.status === 'rejected'))
        expect(String(step.reason)).to.contain('another rotation at once');
      const final = await rotateSigningKey(store, sealer, { retireAfterSeconds: 3600 });
      expect(final.action).to.equal('next-waiting');
      expect(final.keys).to.deep.equal(published[0]!.keys);
    } finally {
      await store.close();
    }
  });

  it('publishes the next key before it signs, then signs with it while the old one still verifies, until it retires', async function () {
    server = await readyServer(env);
    idp = await startRegisteredDevIdp(server);
    const spa = await registerPublicClient(server, 'http://127.0.0.1:1/keys/callback');
    const [first] = await kids();
    const before = await idToken(spa);
    expect(kidOf(before)).to.equal(first);

    expect(await arbiter(env, 'rotate-signing-key')).to.include({ action: 'published-next' });
    await eventually(async () => (await kids()).length === 2);
    const [, next] = await kids();
    expect((await jwks()).keys[1]!.key_ops, 'published, not signing').to.deep.equal(['verify']);
    expect(kidOf(await idToken(spa)), 'the next key does not sign yet').to.equal(first);

    // Run again by mistake (or by every node's schedule at once), the step publishes nothing more and promotes nothing.
    expect(await arbiter(env, 'rotate-signing-key')).to.include({ action: 'next-waiting' });
    expect(await kids()).to.deep.equal([first, next]);
    expect(await arbiter(env, 'rotate-signing-key', '--promote')).to.include({ action: 'promoted-next' });
    await eventually(async () => (await kids())[0] === next);
    const after = await idToken(spa);
    expect(kidOf(after), 'the promoted key signs').to.equal(next);
    const published = createLocalJWKSet(await jwks());
    await jwtVerify(before, published); // the retiring key still verifies what it signed
    await jwtVerify(after, published);
    expect(await kids()).to.include(first);

    // Once the retiring key's tokens have expired, the next rotation step drops it.
    const store = await openArbiterStore(env.STORE_URL!);
    try {
      const later = new Date(Date.now() + 2 * 86_400_000);
      const step = await rotateSigningKey(store, await Sealer.open(store, null), {
        retireAfterSeconds: 0,
        now: later,
        promote: true,
      });
      expect(step.action).to.equal('no-next-key');
      expect(step.dropped).to.deep.equal([first]);
    } finally {
      await store.close();
    }
    await eventually(async () => !(await kids()).includes(first));
    expect((await kids())[0], 'the active key stays first').to.equal(next);
  });

  it('seals every secret again under a new SERVICE_SECRETS_KEY, after which the old key is no longer needed', async function () {
    const oldKey = base64urlKey();
    const newKey = base64urlKey();
    // Every start on the same port: the dev IdP redirects to the issuer it was registered with.
    const port = await freePort();
    // A tenant's own signing keys are sealed too (and opened at start, TENANTS naming it).
    env = { ...env, PORT: String(port), ISSUER: `http://127.0.0.1:${port}`, TENANTS: 'keys-tenant' };
    server = await readyServer({ ...env, SERVICE_SECRETS_KEY: oldKey });
    idp = await startRegisteredDevIdp(server); // its client secret is sealed
    const spa = await registerPublicClient(server, 'http://127.0.0.1:1/keys/callback');
    const signedBefore = await idToken(spa);
    const tenantJwks = await jwks('keys-tenant');
    // A generated client secret is kept as a digest under the store's digest key, itself sealed.
    const generated = await server.admin('POST', '/clients', {
      clientId: 'keys-svc',
      clientType: 'confidential',
      generateClientSecret: true,
      grantTypes: ['client_credentials'],
    });
    expect(generated.status, JSON.stringify(generated.body)).to.equal(201);
    const generatedSecret = generated.body.generatedClientSecret as string;
    // A push stream's receiver credential is sealed too (found 2026-11-30: the rotation left it under the old key).
    const { token: receiverToken } = await clientWithToken(server, 'keys-receiver', ['ssf.manage']);
    const stream = await server.request('/ssf/streams', {
      method: 'POST',
      headers: { authorization: `Bearer ${receiverToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        delivery: {
          method: 'urn:ietf:rfc:8935',
          endpoint_url: 'http://127.0.0.1:1/keys/ssf',
          authorization_header: 'Bearer receiver-credential',
        },
      }),
    });
    expect(stream.status, await stream.clone().text()).to.equal(201);
    const streamId = ((await stream.json()) as { stream_id: string }).stream_id;
    await server.close();
    server = undefined;

    const resealed = await arbiter(
      { ...env, SERVICE_SECRETS_KEY: newKey, SERVICE_SECRETS_KEY_PREVIOUS: oldKey },
      'rotate-secrets-key',
    );
    expect(resealed).to.include({ providerSecrets: true, tenantKeys: 1, sealedFields: 1, streamCredentials: 1 });

    // Only the new key from now on: the signing keys open (the same JWKS), and so does the
    // upstream client secret, which the sign-in's code exchange at the dev IdP needs.
    server = await readyServer({ ...env, SERVICE_SECRETS_KEY: newKey });
    await jwtVerify(signedBefore, createLocalJWKSet(await jwks()));
    expect(kidOf(await idToken(spa))).to.equal(kidOf(signedBefore));
    expect(await jwks('keys-tenant')).to.deep.equal(tenantJwks);
    expect((await clientCredentials(server, 'keys-svc', generatedSecret)).status, 'its digest still checks').to.equal(
      200,
    );
    const kept = await ssfStreams(server.store, DEFAULT_TENANT).get(streamId);
    const newKeyAlone = await Sealer.open(server.store, newKey);
    expect(newKeyAlone.unseal(kept!.authorizationHeader!), 'the new key alone opens it').to.equal(
      'Bearer receiver-credential',
    );
    await server.close();
    server = undefined;
    let refused: unknown;
    await readyServer({ ...env, SERVICE_SECRETS_KEY: oldKey }).then(
      (started) => started.close(),
      (error: unknown) => (refused = error),
    );
    expect(String(refused), 'the old key alone opens nothing any more').to.match(/cannot be opened/);
  });
});
