import { expect } from 'chai';
import { withServer, type TestServer } from '../support/server.js';

/**
 * Issue 27, item 9: dynamic registration takes redirect URIs as OAuth 2.1 §2.3.1 allows them
 * (https, or http on loopback only; no credentials, no wildcard). Each refused one below was
 * registered before.
 */
describe('registration refuses redirect URIs OAuth 2.1 forbids', function () {
  let server: TestServer;

  before(async function () {
    server = await withServer();
  });

  const register = async (redirectUri: string) => {
    const response = await server.request('/register', {
      method: 'POST',
      json: { redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' },
    });
    return (await response.json()) as { error: string; error_description: string };
  };

  for (const [uri, why] of [
    ['http://evil.example/cb', /https/],
    ['https://user:pw@a.example/cb', /credentials/],
    ['https://*.evil.example/cb', /wildcard/],
    ['http://127.0.0.1.evil.example/cb', /https/],
    // Found 2026-11-30: the URL parser reads these as the host "cb", and they were registered as written.
    ['https:///cb', /must name a host/],
    ['https:cb', /must name a host/],
  ] as const) {
    it(`refuses ${uri} with invalid_redirect_uri`, async function () {
      const body = await register(uri);
      expect(body.error, JSON.stringify(body)).to.equal('invalid_redirect_uri');
      expect(body.error_description).to.match(why);
    });
  }

  for (const uri of [
    'http://127.0.0.1:8080/cb',
    'http://[::1]/cb',
    'http://localhost:3000/cb',
    'https://app.example/cb',
  ]) {
    it(`lets ${uri} through validation (to the policy, which refuses open registration by default)`, async function () {
      const body = await register(uri);
      expect(body.error, JSON.stringify(body)).to.equal('invalid_client_metadata');
    });
  }
});
