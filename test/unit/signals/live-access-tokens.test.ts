import { expect } from 'chai';
import { artefactKey, liveAccessTokens } from '../../../adapters/oidc/index.js';
import { OIDC_COLLECTION } from '../../../adapters/oidc/collection.js';
import { memoryStore, TENANT } from '../../support/unit.js';

/** An artefact as the oidc adapter stores it: keyed `<model>:<digest>`, its model top-level too. */
const artefact = (model: string, value: string, exp: number) => ({
  id: artefactKey(model, value),
  model,
  payload: { kind: model, jti: value, exp },
  expiresAt: exp * 1000,
});

describe('live access tokens (adapters/oidc liveAccessTokens, events from policy)', function () {
  const store = memoryStore();

  it("pages every live access and machine token by key, past other kinds' artefacts and expired tokens", async function () {
    const now = Math.floor(Date.now() / 1000);
    const artefacts = store().collection(OIDC_COLLECTION, TENANT);
    const docs = [
      ...Array.from({ length: 7 }, (_, i) => artefact('AccessToken', `at-${i}`, now + 600)),
      artefact('AccessToken', 'at-expired', now - 10),
      ...Array.from({ length: 4 }, (_, i) => artefact('ClientCredentials', `cc-${i}`, now + 600)),
      // Other kinds, keyed before, between and after the access tokens' keys.
      ...Array.from({ length: 20 }, (_, i) => artefact('AuthorizationCode', `code-${i}`, now + 600)),
      ...Array.from({ length: 20 }, (_, i) => artefact('RefreshToken', `rt-${i}`, now + 600)),
      ...Array.from({ length: 20 }, (_, i) => artefact('Session', `session-${i}`, now + 600)),
      ...Array.from({ length: 20 }, (_, i) => artefact('Grant', `grant-${i}`, now + 600)),
    ];
    await artefacts.insertMany(docs);
    await store()
      .collection(OIDC_COLLECTION, 'other-tenant')
      .insertMany([artefact('AccessToken', 'elsewhere', now + 600)]);

    const pages: string[][] = [];
    for await (const page of liveAccessTokens(store(), TENANT, 100, 3)) pages.push(page.map((p) => String(p.jti)));
    expect(pages.flat().sort()).to.deep.equal(
      [...Array.from({ length: 7 }, (_, i) => `at-${i}`), ...Array.from({ length: 4 }, (_, i) => `cc-${i}`)].sort(),
    );
    expect(pages.every((page) => page.length <= 3)).to.equal(true);

    const limited: string[] = [];
    for await (const page of liveAccessTokens(store(), TENANT, 5, 3)) limited.push(...page.map((p) => String(p.jti)));
    expect(limited).to.have.length(5);
  });
});
