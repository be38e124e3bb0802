import { expect } from 'chai';
import { decisionScopes } from '../../../src/oauth/authorize/claims-request.js';
import { claimsNamed, claimsOf, scopesCarrying } from '../../../src/oauth/claims.js';

describe('unit: the claims parameter before the authorize decision (authorize/claims-request, claims)', function () {
  it('names the claims of both members, once each', function () {
    const claims = JSON.stringify({ userinfo: { name: null, email: { essential: true } }, id_token: { email: null } });

    expect(claimsNamed(claims)).to.deep.equal(['name', 'email']);
    expect(claimsNamed(JSON.parse(claims)), 'as a code or refresh token keeps it').to.deep.equal(['name', 'email']);
  });

  it('names nothing for an absent, unreadable or oddly shaped parameter (oidc-provider refuses those)', function () {
    for (const value of [undefined, '', 'not json', 'null', '[]', '"text"', '{"userinfo":"name"}', '{}'])
      expect(claimsNamed(value), String(value)).to.deep.equal([]);
  });

  it('puts the scopes carrying the named claims beside those of scope', function () {
    const params = {
      scope: 'openid  read',
      claims: JSON.stringify({ userinfo: { name: null, email_verified: null } }),
    };

    expect(decisionScopes(params)).to.deep.equal(['openid', 'read', 'profile', 'email']);
  });

  it('leaves the scopes to the scope parameter without claims, and ignores claims no scope carries', function () {
    expect(decisionScopes({ scope: 'openid' })).to.equal(undefined);
    expect(decisionScopes({ scope: 'openid', claims: '{"id_token":{"auth_time":null,"address":null}}' })).to.deep.equal(
      ['openid'],
    );
  });

  it('maps claims to scopes and back, with no inherited names', function () {
    expect(scopesCarrying('preferred_username')).to.deep.equal(['profile']);
    expect(scopesCarrying('constructor')).to.deep.equal([]);
    expect([...claimsOf(['email', 'constructor', '__proto__'])]).to.deep.equal(['email', 'email_verified']);
  });
});
