import { expect } from 'chai';
import { confidentialClient } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';

const REDIRECT = 'https://app.example.test/callback';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

describe('GET /authorize, requests refused before sign-in', function () {
  let server: TestServer;

  before(async function () {
    server = await withServer();
    await confidentialClient(server, 'web-app', { redirectUris: [REDIRECT] });
    await server.admin('POST', '/clients', { clientId: 'public-app', clientType: 'public', redirectUris: [REDIRECT] });
  });

  async function authorize(params: Record<string, string>) {
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: 'web-app',
      redirect_uri: REDIRECT,
      scope: 'openid',
      state: 'st-1',
      ...params,
    });
    return server.request(`/authorize?${query}`);
  }

  /** The error redirect's query, after checking it goes to the registered redirect_uri with the state. */
  function redirectedError(response: Response): URLSearchParams {
    expect(response.status).to.equal(302);
    const location = new URL(response.headers.get('location')!);
    expect(`${location.origin}${location.pathname}`).to.equal(REDIRECT);
    expect(location.searchParams.get('state')).to.equal('st-1');
    expect(location.searchParams.get('error_description')).to.be.a('string').and.not.empty;
    return location.searchParams;
  }

  it('redirects unsupported_response_type for response_type=token', async function () {
    const response = await authorize({ response_type: 'token' });
    const location = new URL(response.headers.get('location') ?? 'http://x/');
    const error = location.searchParams.get('error') ?? new URLSearchParams(location.hash.slice(1)).get('error');
    expect(error).to.equal('unsupported_response_type');
  });

  it('shows an error page, never a redirect, for a redirect_uri that is not registered', async function () {
    const response = await authorize({ redirect_uri: 'https://evil.example.test/callback' });
    expect(response.status).to.equal(400);
    expect(response.headers.get('location')).to.equal(null);
    expect(await response.text()).to.contain('redirect_uri');
  });

  it('requires PKCE from public clients (invalid_request)', async function () {
    const params = redirectedError(await authorize({ client_id: 'public-app' }));
    expect(params.get('error')).to.equal('invalid_request');
  });

  it('refuses authorization_details together with resource, or with a scope policy data does not mark combinable (invalid_request)', async function () {
    const details = JSON.stringify([{ type: 'urn:as:introspect' }]);
    const withScope = redirectedError(await authorize({ authorization_details: details, scope: 'openid profile' }));
    expect(withScope.get('error')).to.equal('invalid_request');
    expect(withScope.get('error_description')).to.match(/cannot be combined with scope profile/);
    const withResource = redirectedError(
      await authorize({ authorization_details: details, scope: '', resource: 'https://api.example.test/' }),
    );
    expect(withResource.get('error')).to.equal('invalid_request');
  });

  it('refuses authorization_details that are not a JSON array of typed objects (invalid_authorization_details)', async function () {
    const params = redirectedError(await authorize({ scope: '', authorization_details: '{"type":' }));
    expect(params.get('error')).to.equal('invalid_authorization_details');
    const unknown = redirectedError(
      await authorize({ scope: '', authorization_details: JSON.stringify([{ type: 'urn:example:never-defined' }]) }),
    );
    expect(unknown.get('error')).to.equal('invalid_authorization_details');
  });

  it('refuses a malformed resource_types list and a resource with a fragment', async function () {
    expect(redirectedError(await authorize({ resource_types: 'a,,b' })).get('error')).to.equal('invalid_request');
    expect(redirectedError(await authorize({ resource: 'https://api.example.test/#x' })).get('error')).to.be.oneOf([
      'invalid_target',
      'invalid_request',
    ]);
  });

  it('refuses prompt=none combined with another value (invalid_request)', async function () {
    expect(redirectedError(await authorize({ prompt: 'none login' })).get('error')).to.equal('invalid_request');
  });

  it('answers prompt=none without a session with login_required', async function () {
    expect(redirectedError(await authorize({ prompt: 'none' })).get('error')).to.equal('login_required');
  });

  it('accepts PKCE plain from a public client as far as sign-in', async function () {
    const response = await authorize({
      client_id: 'public-app',
      code_challenge: CHALLENGE,
      code_challenge_method: 'plain',
    });
    expect(response.status).to.equal(302);
    expect(response.headers.get('location')).not.to.contain('error=');
  });

  it('marks authorization responses no-store', async function () {
    const response = await authorize({ prompt: 'none' });
    expect(response.headers.get('cache-control')).to.equal('no-store');
    expect(response.headers.get('pragma')).to.equal('no-cache');
  });
});
