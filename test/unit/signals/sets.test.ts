import { expect } from 'chai';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWK } from 'jose';
import { loadProviderSecrets, rotateSigningKey } from '../../../src/oauth/index.js';
import { signedSet, type PendingSet } from '../../../src/signals/sets.js';
import { Sealer } from '../../../src/store/index.js';
import { memoryStore, TENANT } from '../../support/unit.js';

const pending = (jti: string): PendingSet => ({
  tenant: TENANT,
  streamId: 'stream-1',
  jti,
  iat: Math.floor(Date.now() / 1000),
  iss: 'https://issuer.example',
  aud: 'receiver',
  subId: { format: 'opaque', id: 'subject-1' },
  events: { 'https://schemas.openid.net/secevent/caep/event-type/session-revoked': {} },
});

/** The tenant's JWKS as its jwks_uri publishes it: the public members of every key. */
async function publishedJwks(store: Parameters<typeof loadProviderSecrets>[0], sealer: Sealer) {
  const { secrets } = await loadProviderSecrets(store, sealer, TENANT);
  const keys = secrets.jwks.keys.map(({ kty, n, e, kid, alg }: JWK) => ({ kty, n, e, kid, alg }));
  return createLocalJWKSet({ keys });
}

describe('signed SETs (src/signals/sets.ts)', function () {
  const store = memoryStore();

  it('signs with the key kept from the previous SET until a rotation, then at once with the new key', async function () {
    const sealer = await Sealer.open(store(), null);
    const first = await signedSet(store(), sealer, pending('set-1'));
    const second = await signedSet(store(), sealer, pending('set-2'));
    const before = decodeProtectedHeader(first).kid;
    expect(decodeProtectedHeader(second).kid).to.equal(before);

    // Published as next (verification only: still the old key signs), then promoted.
    await rotateSigningKey(store(), sealer, { retireAfterSeconds: 3600, tenant: TENANT });
    expect(decodeProtectedHeader(await signedSet(store(), sealer, pending('set-3'))).kid).to.equal(before);
    await rotateSigningKey(store(), sealer, { retireAfterSeconds: 3600, tenant: TENANT, promote: true });

    const after = await signedSet(store(), sealer, pending('set-4'));
    const { protectedHeader, payload } = await jwtVerify(after, await publishedJwks(store(), sealer), {
      issuer: 'https://issuer.example',
      audience: 'receiver',
      typ: 'secevent+jwt',
    });
    expect(protectedHeader.kid).to.not.equal(before);
    const { secrets } = await loadProviderSecrets(store(), sealer, TENANT);
    expect(protectedHeader.kid).to.equal(secrets.jwks.keys[0]?.kid);
    expect(payload.jti).to.equal('set-4');
  });
});
