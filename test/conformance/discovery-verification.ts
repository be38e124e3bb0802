import { expect } from 'chai';
import * as client from 'openid-client';
import type { TestServer } from '../support/server.js';

/**
 * The conformance suite's oidcc-discovery-endpoint-verification module, which the config plan
 * and the dynamic plan both run: the discovery document an RP reads (OpenID Connect Discovery
 * 1.0 §3, §4), read with openid-client; each expectation is one of the module's conditions,
 * named in its comment.
 */
export async function verifyDiscovery(server: TestServer): Promise<void> {
  const issuer = server.config.issuer;
  // GetDynamicServerConfiguration, EnsureDiscoveryEndpointResponseStatusCodeIs200, CheckDiscoveryEndpointReturnedJsonContentType
  const response = await server.request('/.well-known/openid-configuration');
  expect(response.status).to.equal(200);
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  const document = (await response.json()) as Record<string, any>;
  // openid-client discovers from the issuer and checks that the document names it (CheckDiscEndpointIssuer).
  const discovered = await client.discovery(new URL(issuer), 'oidcc-config-rp', undefined, undefined, {
    execute: [client.allowInsecureRequests],
  });
  expect(discovered.serverMetadata().issuer).to.equal(issuer);

  // CheckDiscEndpointIssuerIsValidUrl: no query, no fragment.
  expect(new URL(document.issuer).href.replace(/\/$/, '')).to.equal(issuer);
  // OIDCCCheckDiscEndpointResponseTypesSupported: at least one OpenID Connect response type.
  expect(document.response_types_supported).to.deep.equal(['code']);
  // CheckDiscEndpointSubjectTypesSupported: public or pairwise.
  expect(document.subject_types_supported).to.deep.equal(['public']);
  // OIDCCCheckDiscEndpointIdTokenSigningAlgValuesSupported: RS256.
  expect(document.id_token_signing_alg_values_supported).to.include('RS256');
  // OIDCCCheckDiscEndpointUserinfoSigningAlgValuesSupported: skipped when absent (UserInfo answers JSON only).
  expect(document).not.to.have.property('userinfo_signing_alg_values_supported');
  // CheckDiscEndpointAuthorizationEndpoint, …TokenEndpoint, …UserinfoEndpoint, …RegistrationEndpoint, CheckJwksUri.
  for (const field of ['authorization_endpoint', 'token_endpoint', 'userinfo_endpoint', 'registration_endpoint']) {
    expect(document[field], field)
      .to.be.a('string')
      .and.satisfy((url: string) => url.startsWith(`${issuer}/`));
  }
  // FetchServerKeys, ValidateJwksSequence: RSA signing keys with distinct kids, no private parts.
  const jwks = (await (await fetch(document.jwks_uri)).json()) as { keys: Record<string, unknown>[] };
  expect(jwks.keys.length).to.be.greaterThan(0);
  expect(new Set(jwks.keys.map((key) => key.kid)).size).to.equal(jwks.keys.length);
  for (const key of jwks.keys) {
    expect(key).to.include({ kty: 'RSA', use: 'sig' });
    // RS256, and each key again as PS256 for FAPI 2.0 clients (src/oauth/fapi).
    expect(key.alg).to.be.oneOf(['RS256', 'PS256']);
    expect(key).to.include.keys('n', 'e', 'kid');
    expect(key).not.to.have.any.keys('d', 'p', 'q', 'dp', 'dq', 'qi');
  }
  // CheckDiscEndpointRequestParameterSupported, …RequestUriParameterSupported (informational): signed request
  // objects by value (RFC 9101), request_uri only as PAR's URN, so stated false (it defaults to true).
  expect(document.request_parameter_supported).to.equal(true);
  expect(document.request_uri_parameter_supported).to.equal(false);
  expect(document.request_object_signing_alg_values_supported).to.be.an('array').that.includes('RS256');
  expect(document.request_object_signing_alg_values_supported).to.not.include('none');
  // CheckDiscEndpointClaimsParameterSupported: the claims parameter is supported and said to be.
  expect(document.claims_parameter_supported).to.equal(true);
  // OIDCCCheckDiscEndpointClaimsSupported: an array.
  expect(document.claims_supported).to.be.an('array').that.includes('sub');
  // OIDCCCheckDiscEndpointGrantTypesSupported: a non-empty array.
  expect(document.grant_types_supported).to.include.members(['authorization_code', 'refresh_token']);
  // CheckDiscEndpointScopesSupportedContainsOpenId, CheckDiscEndpointScopesSupportedSyntax.
  expect(document.scopes_supported).to.include('openid');
  for (const scope of document.scopes_supported) expect(scope).to.match(/^[\x21\x23-\x5b\x5d-\x7e]+$/);
  // EnsureServerConfigurationCodeChallengeMethodsSupportedIsAnArray.
  expect(document.code_challenge_methods_supported).to.be.an('array').that.includes('S256');
  // CheckDiscEndpointAllEndpointsAreHttps: every endpoint is the issuer's, so with an https issuer
  // (production) every one is https; the test server's issuer is plain HTTP on loopback.
  for (const [field, value] of Object.entries(document)) {
    if (field.endsWith('_endpoint') || field === 'jwks_uri')
      expect(value, field).to.satisfy((url: string) => url.startsWith(`${issuer}/`));
  }
}
