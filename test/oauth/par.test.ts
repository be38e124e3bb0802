import { expect } from 'chai';
import * as client from 'openid-client';
import { FetchUserAgent, type Page } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, withSignInServer } from '../support/dev-idp.js';
import { basic, confidentialClient, postForm, type JsonResponse } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

const REDIRECT = 'http://127.0.0.1:1/par/callback';
const OTHER_TENANT = 'par-tenant-b';
const PUSHED_URN = /^urn:ietf:params:oauth:request_uri:[\w-]+$/;

/**
 * RFC 9126 pushed authorization requests at /par: client authentication as at /token, the
 * checks of /authorize applied to what is pushed, the pushed parameters (never the query's
 * beside request_uri) decided on by the `authorize` policy, single use, one client and one
 * tenant per request_uri, and a client that requires PAR.
 */
describe('Pushed authorization requests (RFC 9126)', function () {
  let server: TestServer;
  let webSecret: string;

  before(async function () {
    ({ server } = await withSignInServer());
    const openid = { redirectUris: [REDIRECT], scopes: ['openid', 'profile', 'email'] };
    webSecret = await confidentialClient(server, 'par-web', openid);
    await confidentialClient(server, 'par-post', { ...openid, tokenEndpointAuthMethod: 'client_secret_post' });
    await confidentialClient(server, 'par-required', { ...openid, requirePushedAuthorizationRequests: true });
    const spa = await server.admin('POST', '/clients', {
      clientId: 'par-spa',
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      ...openid,
    });
    expect(spa.status).to.equal(201);
    // The same client in another tenant: a request_uri must not cross over to it.
    await confidentialClient(server, 'par-web', openid, OTHER_TENANT);
  });

  /** A code-flow request's parameters with PKCE S256; `extra` adds to or overrides them. */
  async function requestParameters(extra: Record<string, string> = {}) {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const parameters: Record<string, string> = {
      response_type: 'code',
      redirect_uri: REDIRECT,
      scope: 'openid profile',
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      ...extra,
    };
    return { verifier, state, parameters };
  }

  /** POST /par as the confidential client par-web (client_secret_basic), unless `headers` say otherwise. */
  const push = (
    form: Record<string, string>,
    headers: Record<string, string> = { Authorization: basic('par-web', webSecret) },
  ) => postForm(server, '/par', form, headers);

  async function pushed(form: Record<string, string>, headers?: Record<string, string>): Promise<string> {
    const { status, body } = await push(form, headers);
    expect(status, JSON.stringify(body)).to.equal(201);
    return body.request_uri;
  }

  const authorizeUrl = (query: Record<string, string>) =>
    `${server.config.issuer}/authorize?${new URLSearchParams(query)}`;

  /** Follows /authorize through the dev IdP's sign-in to the redirect_uri (or to whatever page stops it). */
  async function signIn(query: Record<string, string>, agent = new FetchUserAgent()): Promise<Page> {
    const first = await agent.navigate(authorizeUrl(query), arrivingAt(REDIRECT));
    if (first.url.href.startsWith(REDIRECT) || first.status !== 200 || !first.body?.includes('<form')) return first;
    return passDevIdpForms(agent, first, 'paula', arrivingAt(REDIRECT));
  }

  const redeem = (
    code: string,
    verifier: string,
    clientId = 'par-web',
    headers = { Authorization: basic('par-web', webSecret) },
  ) =>
    postForm(
      server,
      '/token',
      { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId },
      clientId === 'par-web' ? headers : {},
    );

  /**
   * The error /authorize answers without a code: at the client's registered redirect_uri (oidc-provider
   * sends it to a client's only registered URI when the request names none it can trust), or on an
   * error page; never anywhere else.
   */
  async function refusedAuthorization(query: Record<string, string>, tenant?: string): Promise<string> {
    const response = await server.request(`/authorize?${new URLSearchParams(query)}`, { tenant, redirect: 'manual' });
    const location = response.headers.get('location');
    if (!location) {
      expect(response.status).to.equal(400);
      return /<dt>Error<\/dt><dd><code>([a-z_]+)<\/code>/.exec(await response.text())?.[1] ?? 'no error named';
    }
    await response.body?.cancel();
    const redirect = new URL(location, server.config.issuer);
    expect(`${redirect.origin}${redirect.pathname}`).to.equal(REDIRECT);
    expect(redirect.searchParams.get('code')).to.equal(null);
    return redirect.searchParams.get('error') ?? 'no error named';
  }

  it('advertises /par in discovery, not required server-wide', async function () {
    const document = (await (await server.request('/.well-known/openid-configuration')).json()) as any;
    expect(document.pushed_authorization_request_endpoint).to.equal(`${server.config.issuer}/par`);
    expect(document.require_pushed_authorization_requests).to.equal(false);
  });

  it('pushes a request (201, single request_uri, no-store) that a sign-in then completes with a code and tokens', async function () {
    const { verifier, state, parameters } = await requestParameters();
    const response = await push({ ...parameters, client_id: 'par-web' });
    expect(response.status, JSON.stringify(response.body)).to.equal(201);
    expect(response.body.request_uri).to.match(PUSHED_URN);
    expect(response.body.expires_in).to.be.a('number').within(1, 60);
    expect(response.headers.get('cache-control')).to.equal('no-store');
    expect(response.headers.get('pragma')).to.equal('no-cache');

    const arrived = await signIn({ client_id: 'par-web', request_uri: response.body.request_uri });
    expect(arrived.url.searchParams.get('state')).to.equal(state);
    const code = arrived.url.searchParams.get('code');
    expect(code, arrived.url.href).to.be.a('string');
    const tokens = await redeem(code!, verifier);
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    expect(tokens.body.scope.split(' ').sort()).to.deep.equal(['openid', 'profile']);
  });

  describe('the authorize decision', function () {
    it('decides on the pushed parameters, not on query parameters beside request_uri', async function () {
      const { verifier, state, parameters } = await requestParameters({ scope: 'openid email' });
      const requestUri = await pushed({ ...parameters, client_id: 'par-web' });
      const arrived = await signIn({
        client_id: 'par-web',
        request_uri: requestUri,
        scope: 'openid profile',
        state: 'from-the-query',
        redirect_uri: 'http://127.0.0.1:1/elsewhere',
      });
      expect(arrived.url.href.startsWith(REDIRECT), arrived.url.href).to.equal(true);
      expect(arrived.url.searchParams.get('state')).to.equal(state);
      const tokens = await redeem(arrived.url.searchParams.get('code')!, verifier);
      expect(tokens.body.scope.split(' ').sort()).to.deep.equal(['email', 'openid']);

      // The decision is taken when the request resumes after sign-in, at /authorize/<uid>.
      const entry = (await server.admin('GET', '/audit-logs?clientId=par-web&size=50&sort=id,desc')).body.content.find(
        (candidate: any) => candidate.endpoint.startsWith('/authorize') && candidate.policyInput?.request,
      );
      expect(entry.policyInput.request.scopes.sort()).to.deep.equal(['email', 'openid']);
      expect(entry.policyInput.request.parameters.state).to.equal(state);
    });

    it("applies the policy's refusal to a pushed request, whatever the query says beside it", async function () {
      // The default policy grants par-web none of `introspection` (not among its registered scopes).
      const { state, parameters } = await requestParameters({ scope: 'introspection' });
      const requestUri = await pushed({ ...parameters, client_id: 'par-web' });
      const arrived = await signIn({ client_id: 'par-web', request_uri: requestUri, scope: 'openid' });
      expect(arrived.url.href.startsWith(REDIRECT), arrived.url.href).to.equal(true);
      expect(arrived.url.searchParams.get('error')).to.equal('invalid_scope');
      expect(arrived.url.searchParams.get('state')).to.equal(state);
      expect(arrived.url.searchParams.get('code')).to.equal(null);
    });
  });

  describe('client authentication, as at /token', function () {
    it('answers 401 invalid_client to a push that names no client', async function () {
      const { parameters } = await requestParameters();
      const { status, body, headers } = await push(parameters, {});
      expect(status).to.equal(401);
      expect(body.error).to.equal('invalid_client');
      expect(headers.get('www-authenticate')).to.match(/^Basic /);
    });

    it('answers 401 invalid_client to a confidential client without its secret, or with a wrong one', async function () {
      const { parameters } = await requestParameters();
      const bare = await push({ ...parameters, client_id: 'par-web' }, {});
      expect([bare.status, bare.body.error]).to.deep.equal([401, 'invalid_client']);
      const wrong = await push({ ...parameters, client_id: 'par-web' }, { Authorization: basic('par-web', 'wrong') });
      expect([wrong.status, wrong.body.error]).to.deep.equal([401, 'invalid_client']);
    });

    it('holds each client to its registered method (a basic client posting its secret is refused)', async function () {
      const { parameters } = await requestParameters();
      const posted = await push({ ...parameters, client_id: 'par-web', client_secret: webSecret }, {});
      expect([posted.status, posted.body.error]).to.deep.equal([401, 'invalid_client']);
      const postClient = await push(
        { ...parameters, client_id: 'par-post', client_secret: 'par-post-secret-value' },
        {},
      );
      expect(postClient.status, JSON.stringify(postClient.body)).to.equal(201);
    });

    it('lets a public client push with its client_id, PKCE plain included', async function () {
      const verifier = client.randomPKCECodeVerifier();
      const { parameters } = await requestParameters({ code_challenge: verifier, code_challenge_method: 'plain' });
      const requestUri = await pushed({ ...parameters, client_id: 'par-spa' }, {});
      const arrived = await signIn({ client_id: 'par-spa', request_uri: requestUri });
      const tokens = await redeem(arrived.url.searchParams.get('code')!, verifier, 'par-spa');
      expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    });

    it('refuses a body over 64 KiB with 413 before reading it whole: a pushed request is stored whole until it expires', async function () {
      const { parameters } = await requestParameters({ state: 'x'.repeat(64 * 1024) });
      const { status, body } = await push({ ...parameters, client_id: 'par-web' });
      expect(status).to.equal(413);
      expect(body.error).to.equal('invalid_request');
      // Just under it, pushed.
      const { parameters: under } = await requestParameters({ state: 'x'.repeat(60 * 1024) });
      expect((await push({ ...under, client_id: 'par-web' })).status).to.equal(201);
    });

    it('answers other methods than POST without pushing anything', async function () {
      const response = await server.request('/par');
      expect(response.status).to.be.oneOf([404, 405]);
      await response.body?.cancel();
    });

    it('is audited', async function () {
      const { parameters } = await requestParameters();
      await pushed({ ...parameters, client_id: 'par-web' });
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/par&clientId=par-web&size=1&sort=id,desc')).body
        .content;
      expect(entry).to.include({ endpoint: '/par', method: 'POST', outcome: 'allow' });
      expect(entry.requestSummary.hasClientSecret).to.equal(true);
    });
  });

  describe('the checks of /authorize, at /par', function () {
    async function refusal(extra: Record<string, string>, clientId = 'par-web'): Promise<JsonResponse> {
      const { parameters } = await requestParameters(extra);
      const form = Object.fromEntries(
        Object.entries({ ...parameters, client_id: clientId }).filter(([, v]) => v !== ''),
      );
      const response = await push(form, clientId === 'par-web' ? undefined : {});
      expect(response.status, JSON.stringify(response.body)).to.equal(400);
      expect(response.headers.get('location')).to.equal(null);
      return response;
    }

    it('requires redirect_uri, registered', async function () {
      expect((await refusal({ redirect_uri: '' })).body.error).to.equal('invalid_request');
      expect((await refusal({ redirect_uri: 'https://evil.example.test/cb' })).body.error).to.equal('invalid_request');
    });

    it('refuses malformed or unknown authorization_details (invalid_authorization_details)', async function () {
      const malformed = await refusal({ scope: '', authorization_details: '{"type":' });
      expect(malformed.body.error).to.equal('invalid_authorization_details');
      const unknown = await refusal({
        scope: '',
        authorization_details: JSON.stringify([{ type: 'urn:example:never' }]),
      });
      expect(unknown.body.error).to.equal('invalid_authorization_details');
    });

    it('refuses authorization_details with scope (invalid_request), a bad resource (invalid_target), bad resource_types', async function () {
      const details = JSON.stringify([{ type: 'urn:as:introspect' }]);
      expect((await refusal({ authorization_details: details })).body.error).to.equal('invalid_request');
      expect((await refusal({ resource: 'https://api.example.test/#fragment' })).body.error).to.equal('invalid_target');
      expect((await refusal({ resource: 'not a uri' })).body.error).to.equal('invalid_target');
      expect((await refusal({ resource_types: 'a,,b' })).body.error).to.equal('invalid_request');
    });

    it('requires PKCE from a public client, and refuses request_uri inside a pushed request', async function () {
      expect((await refusal({ code_challenge: '', code_challenge_method: '' }, 'par-spa')).body.error).to.equal(
        'invalid_request',
      );
      // RFC 9126 §2.1: a pushed request cannot itself point at another: invalid_request, said why.
      for (const requestUri of ['urn:ietf:params:oauth:request_uri:abc', 'https://rp.example.test/request.jwt']) {
        const { status, body } = await refusal({ request_uri: requestUri });
        expect([status, body.error]).to.deep.equal([400, 'invalid_request']);
        expect(body.error_description).to.match(/request_uri/);
      }
    });

    it('refuses a JSON parameter nested too deep', async function () {
      const deep = `${'['.repeat(40)}${']'.repeat(40)}`;
      expect((await refusal({ scope: '', authorization_details: deep })).body.error).to.equal(
        'invalid_authorization_details',
      );
    });
  });

  describe('a request_uri is good for one authorization, of its client, in its tenant', function () {
    it('cannot be used again once it has given a code', async function () {
      const { parameters } = await requestParameters();
      const requestUri = await pushed({ ...parameters, client_id: 'par-web' });
      const first = await signIn({ client_id: 'par-web', request_uri: requestUri });
      expect(first.url.searchParams.get('code')).to.be.a('string');
      expect(await refusedAuthorization({ client_id: 'par-web', request_uri: requestUri })).to.equal(
        'invalid_request_uri',
      );
    });

    it('refuses an unknown request_uri, and one that is not a pushed request (request_uri_not_supported)', async function () {
      const unknown = { client_id: 'par-web', request_uri: 'urn:ietf:params:oauth:request_uri:nope' };
      expect(await refusedAuthorization(unknown)).to.equal('invalid_request_uri');
      const byUrl = {
        client_id: 'par-web',
        request_uri: 'https://app.example.test/request.jwt',
        redirect_uri: REDIRECT,
      };
      expect(await refusedAuthorization(byUrl)).to.equal('request_uri_not_supported');
    });

    it("refuses another client's request_uri, which its own client can still use", async function () {
      const { state, parameters } = await requestParameters();
      const requestUri = await pushed({ ...parameters, client_id: 'par-web' });
      const stolen = { client_id: 'par-spa', request_uri: requestUri, redirect_uri: REDIRECT };
      expect(await refusedAuthorization(stolen)).to.equal('invalid_request_object');

      const own = await signIn({ client_id: 'par-web', request_uri: requestUri });
      expect(own.url.searchParams.get('state')).to.equal(state);
      expect(own.url.searchParams.get('code')).to.be.a('string');
    });

    it('dies with its client: disabled and enabled again, the client cannot use what it pushed before', async function () {
      const secret = await confidentialClient(server, 'par-paused', { redirectUris: [REDIRECT], scopes: ['openid'] });
      const { parameters } = await requestParameters({ scope: 'openid' });
      const asPaused = { Authorization: basic('par-paused', secret) };
      const before = await pushed({ ...parameters, client_id: 'par-paused' }, asPaused);
      const {
        id: _id,
        createdAt: _created,
        updatedAt: _updated,
        ...record
      } = (await server.admin('GET', '/clients/par-paused')).body;
      for (const enabled of [false, true])
        expect((await server.admin('PUT', '/clients/par-paused', { ...record, enabled })).status).to.equal(200);
      expect(await refusedAuthorization({ client_id: 'par-paused', request_uri: before })).to.equal(
        'invalid_request_uri',
      );
      const after = await pushed({ ...parameters, client_id: 'par-paused' }, asPaused);
      expect((await signIn({ client_id: 'par-paused', request_uri: after })).url.searchParams.get('code')).to.be.a(
        'string',
      );
    });

    it('is unknown in another tenant, even to a client of the same client_id', async function () {
      const { parameters } = await requestParameters();
      const requestUri = await pushed({ ...parameters, client_id: 'par-web' });
      expect(await refusedAuthorization({ client_id: 'par-web', request_uri: requestUri }, OTHER_TENANT)).to.equal(
        'invalid_request_uri',
      );

      const secretB = 'par-web-secret-value';
      const pushedInB = await postForm(
        server,
        '/par',
        { ...parameters, client_id: 'par-web' },
        { Authorization: basic('par-web', secretB), 'X-Tenant-Id': OTHER_TENANT },
      );
      expect(pushedInB.status, JSON.stringify(pushedInB.body)).to.equal(201);
      expect(await refusedAuthorization({ client_id: 'par-web', request_uri: pushedInB.body.request_uri })).to.equal(
        'invalid_request_uri',
      );
    });
  });

  describe('a client that requires PAR', function () {
    it('is refused a plain authorization request, and signs in through /par', async function () {
      const { verifier, parameters } = await requestParameters();
      const plain = await server.request(
        authorizeUrl({ ...parameters, client_id: 'par-required' }).slice(server.config.issuer.length),
        {
          redirect: 'manual',
        },
      );
      expect(plain.status).to.equal(302);
      const location = new URL(plain.headers.get('location')!);
      expect(location.searchParams.get('error')).to.equal('invalid_request');
      expect(location.searchParams.get('error_description')).to.match(/Pushed Authorization Request/i);

      const requestUri = await pushed(
        { ...parameters, client_id: 'par-required' },
        { Authorization: basic('par-required', 'par-required-secret-value') },
      );
      const arrived = await signIn({ client_id: 'par-required', request_uri: requestUri });
      const tokens = await postForm(
        server,
        '/token',
        {
          grant_type: 'authorization_code',
          code: arrived.url.searchParams.get('code')!,
          redirect_uri: REDIRECT,
          code_verifier: verifier,
        },
        { Authorization: basic('par-required', 'par-required-secret-value') },
      );
      expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    });

    it('is set and cleared through the Admin API clients collection', async function () {
      await confidentialClient(server, 'par-toggled', { redirectUris: [REDIRECT], scopes: ['openid'] });
      const { parameters } = await requestParameters({ scope: 'openid' });
      const plainError = async () => {
        const response = await server.request(
          `/authorize?${new URLSearchParams({ ...parameters, client_id: 'par-toggled' })}`,
          {
            redirect: 'manual',
          },
        );
        return new URL(response.headers.get('location')!, server.config.issuer).searchParams.get('error');
      };
      expect(await plainError()).to.equal(null);
      const record = (await server.admin('GET', '/clients/par-toggled')).body;
      const { id: _id, createdAt: _created, updatedAt: _updated, ...fields } = record;
      const required = await server.admin('PUT', '/clients/par-toggled', {
        ...fields,
        requirePushedAuthorizationRequests: true,
      });
      expect(required.status, JSON.stringify(required.body)).to.equal(200);
      expect(required.body.requirePushedAuthorizationRequests).to.equal(true);
      expect(await plainError()).to.equal('invalid_request');
      await server.admin('PUT', '/clients/par-toggled', { ...fields, requirePushedAuthorizationRequests: false });
      expect(await plainError()).to.equal(null);

      const invalid = await server.admin('PUT', '/clients/par-toggled', {
        ...fields,
        requirePushedAuthorizationRequests: 'yes',
      });
      expect(invalid.status).to.equal(400);
      expect(invalid.body.field).to.equal('requirePushedAuthorizationRequests');
    });

    it('is set by dynamic registration (RFC 9126 §6) and shown in the client information', async function () {
      // Open registration is off in the default policy; an initial access token lets one through.
      const { token } = (await server.admin('POST', '/initial-access-tokens', { name: 'par test', uses: 2 })).body;
      const register = (json: unknown) =>
        server.request('/register', { method: 'POST', json, headers: { Authorization: `Bearer ${token}` } });
      const registered = await register({
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: 'none',
        require_pushed_authorization_requests: true,
      });
      const body = (await registered.json()) as any;
      expect(registered.status, JSON.stringify(body)).to.equal(201);
      expect(body.require_pushed_authorization_requests).to.equal(true);
      const { parameters } = await requestParameters({ scope: 'openid' });
      const response = await server.request(
        `/authorize?${new URLSearchParams({ ...parameters, client_id: body.client_id })}`,
        {
          redirect: 'manual',
        },
      );
      expect(new URL(response.headers.get('location')!).searchParams.get('error')).to.equal('invalid_request');
      const requestUri = await pushed({ ...parameters, client_id: body.client_id }, {});
      expect(requestUri).to.match(PUSHED_URN);

      const wrongType = await register({ redirect_uris: [REDIRECT], require_pushed_authorization_requests: 'true' });
      expect(wrongType.status).to.equal(400);
      expect(((await wrongType.json()) as any).error).to.equal('invalid_client_metadata');
    });
  });
});

describe('Pushed authorization requests: the failure limit of /token', function () {
  const LIMIT = 3;
  let server: TestServer;

  before(async function () {
    // Its own server: it counts failures against a small limit.
    server = await readyServer({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_SECONDS: '600' });
  });
  after(async function () {
    await server?.close();
  });

  it('refuses a client that failed too often with 429, unverified, as /token does', async function () {
    const secret = await confidentialClient(server, 'par-guessed', { redirectUris: [REDIRECT], scopes: ['openid'] });
    const push = (presented: string) =>
      postForm(
        server,
        '/par',
        {
          response_type: 'code',
          client_id: 'par-guessed',
          redirect_uri: REDIRECT,
          scope: 'openid',
          code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          code_challenge_method: 'S256',
        },
        { Authorization: basic('par-guessed', presented) },
      );
    for (let attempt = 0; attempt < LIMIT; attempt++) expect((await push('wrong')).status).to.equal(401);
    const locked = await push(secret);
    expect(locked.status, 'even the right secret waits').to.equal(429);
    expect(locked.body.error).to.equal('too_many_requests');
    expect(Number(locked.headers.get('retry-after'))).to.be.within(1, 600);
  });
});
