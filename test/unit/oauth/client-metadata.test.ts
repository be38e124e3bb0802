import { expect } from 'chai';
import type { ClientRecord } from '../../../src/catalog/index.js';
import { clientMetadata, recordFieldsOf, registeredMetadataOf } from '../../../src/oauth/clients/metadata.js';
import { validateMetadata } from '../../../src/oauth/register/validation.js';

const record: ClientRecord = {
  id: 7,
  tenantId: null,
  clientId: 'app',
  clientType: 'confidential',
  clientSecret: '$2b$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234',
  redirectUris: ['https://app.example.test/cb'],
  tokenEndpointAuthMethod: 'client_secret_post',
  grantTypes: ['authorization_code', 'refresh_token'],
  responseTypes: ['code'],
  clientName: 'App',
  tosUri: 'https://app.example.test/tos',
  contacts: ['ops@example.test'],
  softwareId: '4f0c8d5e-3b1a-4c2d-9e8f-0a1b2c3d4e5f',
};

describe('unit: one mapping between client records and client metadata (oauth/clients/metadata)', function () {
  it('reads RFC 7591 members into the record fields it answers them from', function () {
    const members = registeredMetadataOf(record);
    expect(members).to.deep.include({
      redirect_uris: record.redirectUris,
      tos_uri: record.tosUri,
      contacts: record.contacts,
    });
    expect(recordFieldsOf(members)).to.deep.equal({
      redirectUris: record.redirectUris,
      tokenEndpointAuthMethod: 'client_secret_post',
      grantTypes: record.grantTypes,
      responseTypes: ['code'],
      clientName: 'App',
      tosUri: record.tosUri,
      contacts: record.contacts,
      softwareId: record.softwareId,
    });
  });

  it('gives oidc-provider its share only, with the policy-decided grants and the stored hash', function () {
    const metadata = clientMetadata(record)!;
    expect(metadata).to.include({
      client_id: 'app',
      client_secret: record.clientSecret,
      token_endpoint_auth_method: 'client_secret_post',
    });
    expect(metadata).to.not.have.any.keys('tos_uri', 'contacts', 'software_id');
    expect(metadata.grant_types).to.include.members([
      'authorization_code',
      'urn:ietf:params:oauth:grant-type:token-exchange',
    ]);
    expect(clientMetadata({ ...record, enabled: false }), 'a disabled client does not exist').to.equal(undefined);
  });
});

describe('unit: a registration request checked by the catalog schema and named rules (oauth/register/validation)', function () {
  const valid = { redirect_uris: ['https://app.example.test/cb'] };
  const refusal = (body: Record<string, unknown>) => {
    try {
      validateMetadata(body);
      return null;
    } catch (error) {
      return { code: (error as { code: string }).code, description: (error as Error).message };
    }
  };

  it('fills in RFC 7591 defaults and drops repeats', function () {
    expect(validateMetadata({ ...valid, contacts: ['a@example.test', 'a@example.test'] })).to.deep.include({
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      contacts: ['a@example.test'],
    });
  });

  it('passes a scope asked for on, and an empty one as none', function () {
    expect(validateMetadata({ ...valid, scope: 'read write' }).scope).to.equal('read write');
    expect(validateMetadata({ ...valid, scope: '' })).to.not.have.property('scope');
  });

  it('names the RFC 7591 member in what the catalog schema refuses', function () {
    expect(refusal({ ...valid, software_id: 'nope' })).to.deep.equal({
      code: 'invalid_client_metadata',
      description: 'software_id must be a UUID',
    });
    expect(refusal({ ...valid, grant_types: ['implicit'] })?.description).to.match(
      /^grant_types\.0 must be one of authorization_code/,
    );
    expect(refusal({ ...valid, client_name: 5 })).to.deep.equal({
      code: 'invalid_client_metadata',
      description: 'client_name must be string',
    });
  });

  it('holds a request to the rules only registration has', function () {
    expect(refusal({})).to.deep.equal({ code: 'invalid_redirect_uri', description: 'redirect_uris is required' });
    expect(refusal({ ...valid, token_endpoint_auth_method: 'private_key_jwt' })?.description).to.equal(
      'token_endpoint_auth_method private_key_jwt needs jwks or jwks_uri',
    );
    expect(
      refusal({ ...valid, token_endpoint_auth_method: 'none', grant_types: ['client_credentials'] })?.description,
    ).to.equal('grant_types client_credentials needs a confidential token_endpoint_auth_method');
    expect(refusal({ ...valid, scope: 'a  b' })?.description).to.match(/^scope must be/);
  });
});
