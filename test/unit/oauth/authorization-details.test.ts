import { expect } from 'chai';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { richAuthorizationRequests } from '../../../src/oauth/shared/rar.js';

type DetailsHook = (ctx: KoaContextWithOIDC, token: unknown, source?: { rar?: unknown[] }) => unknown[];

/** The RFC 9396 hooks Arbiter gives oidc-provider, taken from its configuration slice. */
function hooks() {
  const slice = richAuthorizationRequests({
    vocabulary: { authorizationDetailsTypes: ['urn:example:payment'] },
  } as never);
  const feature = (slice as { features: { richAuthorizationRequests: Record<string, DetailsHook> } }).features
    .richAuthorizationRequests;
  return {
    forAccessToken: feature.authorizationDetailsForAccessToken!,
    forGrantSource: feature.authorizationDetailsForGrantSource as unknown as (
      ctx: KoaContextWithOIDC,
      source: { rar?: unknown[] },
    ) => unknown[],
  };
}

const withDecision = (decision?: object) => ({ state: { policyDecision: decision } }) as unknown as KoaContextWithOIDC;
const PAYMENT = { type: 'urn:example:payment', amount: '5' };

describe('unit: the authorization details a token carries are the decision’s (oauth/shared/rar)', function () {
  // Found 2026-11-30: a decision that named none (as every decision Cedar makes alone) got the
  // code's or refresh token's details, which the token response, introspection and JWTs showed.
  it('gives none where the decision names none, whatever the code or refresh token carried', function () {
    const { forAccessToken, forGrantSource } = hooks();
    const scopesOnly = withDecision({ allow: true, scopes: ['openid'] });
    expect(forAccessToken(scopesOnly, {}, { rar: [PAYMENT] })).to.deep.equal([]);
    expect(forGrantSource(scopesOnly, { rar: [PAYMENT] })).to.deep.equal([]);
  });

  it("gives the decision's own where it names them, and the source's where no decision was made", function () {
    const { forAccessToken } = hooks();
    const granted = withDecision({ allow: true, scopes: [], authorization_details: [PAYMENT] });
    expect(forAccessToken(granted, {}, { rar: [] })).to.deep.equal([PAYMENT]);
    expect(forAccessToken(withDecision(undefined), {}, { rar: [PAYMENT] })).to.deep.equal([PAYMENT]);
  });
});
