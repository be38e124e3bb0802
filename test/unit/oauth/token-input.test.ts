import { expect } from 'chai';
import { definedOnly } from '../../../src/oauth/token/grants/token-input.js';
import { requestInput, withoutCredentials } from '../../../src/policy/index.js';

describe('unit: the request part of a decision input (grants/token-input, policy/request-input)', function () {
  it('definedOnly drops the parameters oidc-provider lists as undefined, and keeps empty and falsy values', function () {
    expect(
      definedOnly({
        grant_type: 'client_credentials',
        scope: undefined,
        resource: '',
        n: 0,
        flag: false,
        nothing: null,
      }),
    ).to.deep.equal({ grant_type: 'client_credentials', resource: '', n: 0, flag: false, nothing: null });
  });

  it('withoutCredentials removes every credential or bearer parameter and keeps the rest', function () {
    const credentials = [
      'client_secret',
      'client_assertion',
      'code',
      'code_verifier',
      'refresh_token',
      'subject_token',
      'actor_token',
      'token',
      'assertion',
      'password',
      'software_statement',
      'ticket',
      'claim_token',
      'rpt',
      'pct',
      'device_code',
      'user_code',
      'id_token_hint',
      'id_token',
      'login_hint_token',
      'access_token',
      'logout_token',
      'request',
    ];
    const given = Object.fromEntries(
      [...credentials, 'grant_type', 'scope', 'client_id'].map((name) => [name, `${name}-value`]),
    );
    expect(withoutCredentials(given)).to.deep.equal({
      grant_type: 'grant_type-value',
      scope: 'scope-value',
      client_id: 'client_id-value',
    });
  });

  it('requestInput derives grant type, scopes, resource, resource types and authorization details from the parameters', function () {
    const input = requestInput({
      endpoint: '/token',
      parameters: {
        grant_type: 'client_credentials',
        scope: ' read  write ',
        resource: 'https://rs.example.test/',
        resource_types: 'urn:a, urn:b,,',
        authorization_details: JSON.stringify([{ type: 'payment', amount: 1 }, { notype: true }, 'junk']),
        client_secret: 's3cret',
      },
    });
    expect(input).to.deep.equal({
      endpoint: '/token',
      method: 'POST',
      parameters: {
        grant_type: 'client_credentials',
        scope: ' read  write ',
        resource: 'https://rs.example.test/',
        resource_types: 'urn:a, urn:b,,',
        authorization_details: '[{"type":"payment","amount":1},{"notype":true},"junk"]',
      },
      grant_type: 'client_credentials',
      scopes: ['read', 'write'],
      resource: 'https://rs.example.test/',
      resolved_resource_type: null,
      resources: [{ resource: 'https://rs.example.test/', resolved_resource_type: null }],
      resource_types: ['urn:a', 'urn:b'],
      authorization_details: [{ type: 'payment', amount: 1 }],
    });
  });

  it('requestInput gives several resources (RFC 8707) as resources, and then no single resource', function () {
    const several = requestInput({
      endpoint: '/authorize',
      parameters: { resource: ['https://a.example.test/', 'https://b.example.test/'] },
    });
    expect(several.resource).to.equal(null);
    expect(several.resources).to.deep.equal([], 'only a caller that resolved them lists them');
    const one = requestInput({ endpoint: '/authorize', parameters: { resource: ['https://a.example.test/'] } });
    expect(one.resource).to.equal('https://a.example.test/');
    const explicit = requestInput({
      endpoint: '/authorize',
      parameters: { resource: 'https://a.example.test/' },
      resource: null,
      resources: [
        { resource: 'https://a.example.test/', resolved_resource_type: 'urn:a' },
        { resource: 'https://b.example.test/', resolved_resource_type: null },
      ],
    });
    expect(explicit.resource, 'an explicit null is kept, not read from the parameters').to.equal(null);
    expect(explicit.resources).to.have.length(2);
  });

  it('requestInput prefers the parts given explicitly, and reads malformed authorization details as none', function () {
    const input = requestInput({
      endpoint: '/token',
      method: 'GET',
      parameters: { scope: 'a b', grant_type: '', authorization_details: '[{' },
      scopes: ['c'],
      resolved_resource_type: 'urn:x',
    });
    expect(input).to.include({ method: 'GET', grant_type: null, resource: null, resolved_resource_type: 'urn:x' });
    expect(input.scopes).to.deep.equal(['c']);
    expect(input.authorization_details).to.deep.equal([]);
  });
});
