import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { checksOf, pendingCookie } from '../../../src/admin/sign-in.js';
import { UpstreamLogins } from '../../../src/oauth/interactions/upstream-logins.js';
import { openedWith, sealedFor } from '../../../src/store/index.js';
import { memoryStore, TENANT } from '../../support/unit.js';

/**
 * A sign-in under way (at an upstream provider for a user, or for the console) keeps its nonce and
 * PKCE verifier until the callback: sealed for the holder of its state, which the store keeps only
 * as a digest, so that a copy of the store (even with SERVICE_SECRETS_KEY) holds neither in clear.
 */
describe('Sign-ins under way keep their nonce and verifier sealed for the holder of the state (store/digest.ts)', function () {
  const store = memoryStore();
  const random = () => randomBytes(32).toString('base64url');
  const rawRows = async (collection: string) => JSON.stringify(await store().collection(collection, TENANT).find({}));

  it('opens with the secret it was sealed for only, and not once altered', function () {
    const secret = random();
    const sealed = sealedFor(secret, 'the value');
    expect(sealed).not.to.contain('the value');
    expect(openedWith(secret, sealed)).to.equal('the value');
    expect(openedWith(random(), sealed)).to.equal(null);
    const altered = Buffer.from(sealed, 'base64url');
    altered[altered.length - 1]! ^= 1;
    expect(openedWith(secret, altered.toString('base64url'))).to.equal(null);
    expect(openedWith(secret, 'short')).to.equal(null);
  });

  it('an upstream sign-in: the stored record holds neither; the callback with the state gets both, once', async function () {
    const logins = new UpstreamLogins(store(), TENANT);
    const checks = { state: random(), nonce: `nonce-${random()}`, codeVerifier: `verifier-${random()}` };
    const browser = random();
    await logins.begin('interaction-1', 7, 'https://as.example/idp/callback/corp', checks, browser);
    const stored = await rawRows('upstream_logins');
    for (const value of [checks.state, checks.nonce, checks.codeVerifier, browser])
      expect(stored).not.to.contain(value);
    expect(await logins.claim(random(), browser), 'another state').to.equal(null);
    expect(await logins.claim(checks.state, random()), 'another browser').to.equal(null);
    expect(await logins.claim(checks.state, undefined), 'no browser binding').to.equal(null);
    expect(await logins.claim(checks.state, browser)).to.deep.equal({
      uid: 'interaction-1',
      identityProviderId: 7,
      redirectUri: 'https://as.example/idp/callback/corp',
      checks,
    });
    expect(await logins.claim(checks.state, browser), 'a second time').to.equal(null);
    // One begun by the release before the binding (no digest), in the ten minutes after an upgrade: claimed as then.
    const legacy = { state: random(), nonce: `nonce-${random()}`, codeVerifier: `verifier-${random()}` };
    await logins.begin('interaction-2', 7, 'https://as.example/idp/callback/corp', legacy, random());
    const rows = store().collection<any>('upstream_logins', TENANT);
    const { browserDigest: _dropped, ...older } = (await rows.find({ uid: 'interaction-2' }))[0];
    await rows.upsert(older);
    expect(await logins.claim(legacy.state, undefined), "an older release's login").to.include({
      uid: 'interaction-2',
    });
  });

  it('a console sign-in: nothing is stored; its cookie holds neither in clear and opens with the state only, until it expires', async function () {
    const checks = { state: random(), nonce: `nonce-${random()}`, codeVerifier: `verifier-${random()}` };
    const cookie = pendingCookie(checks);
    for (const value of [checks.state, checks.nonce, checks.codeVerifier]) expect(cookie).not.to.contain(value);
    expect(checksOf(random(), cookie), 'another state (login CSRF)').to.equal(null);
    expect(checksOf(checks.state, undefined), 'without the sign-in cookie').to.equal(null);
    expect(checksOf(checks.state, cookie)).to.deep.equal({ nonce: checks.nonce, codeVerifier: checks.codeVerifier });
    const expired = sealedFor(
      checks.state,
      JSON.stringify({ nonce: 'n', codeVerifier: 'v', expiresAt: Date.now() - 1 }),
    );
    expect(checksOf(checks.state, expired), 'expired').to.equal(null);
  });
});
