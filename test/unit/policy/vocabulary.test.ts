import { expect } from 'chai';
import type { PolicySnapshot } from '../../../src/policy/bundle/build.js';
import { PolicyVocabularies } from '../../../src/policy/vocabulary.js';

const snapshot = (revision: string, mergedData: Record<string, unknown>): PolicySnapshot =>
  ({ revision, rules: [], data: [], mergedData, skipped: [] }) as PolicySnapshot;

/** What providers are built from (src/oauth/providers.ts): the same digest for what says the same. */
describe('The policy vocabulary', function () {
  const oauth = (scopes: string[], types: Record<string, unknown> = {}) => ({
    oauth: { oidc_scopes: scopes, resource_types: types },
    unrelated: { written: 'now' },
  });

  it('has one digest for the same types and scopes, whatever the revision or the order of the scopes', function () {
    const first = new PolicyVocabularies().of(snapshot('r1', oauth(['openid', 'profile'], { 'urn:t': {} })));
    const second = new PolicyVocabularies().of(
      snapshot('r2', { ...oauth(['profile', 'openid'], { 'urn:t': {} }), unrelated: { written: 'later' } }),
    );
    expect(second.revision).to.equal('r2');
    expect(second.digest).to.equal(first.digest);
  });

  it('has another digest when a scope or an authorization details type changes', function () {
    const vocabularies = new PolicyVocabularies();
    const digests = [
      vocabularies.of(snapshot('r1', oauth(['openid']))).digest,
      vocabularies.of(snapshot('r2', oauth(['openid', 'photos.read']))).digest,
      vocabularies.of(snapshot('r3', oauth(['openid', 'photos.read'], { 'urn:photos': { scopes: [] } }))).digest,
    ];
    expect(new Set(digests).size).to.equal(3);
  });
});
