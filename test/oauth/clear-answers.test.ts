import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerPublicClient,
  withSignInServer,
} from '../support/dev-idp.js';
import { basic, clientCredentials, confidentialClient, postForm, type JsonResponse } from '../support/oauth.js';
import { withServer, type TestServer } from '../support/server.js';

const REDIRECT = 'https://clear-answers.example.test/callback';

/**
 * Issue 28, point 8: answers that say what went wrong. A tenant's client that calls without
 * X-Tenant-Id is told that clients of other tenants need it (and nothing about which clients
 * exist where); an unknown scope beside a known one is left out and the answer's `scope` says
 * what was granted (RFC 6749 §3.3); the page a browser gets when it cannot be sent back to the
 * client is Arbiter's own, with the request id.
 */
describe('Answers that say what went wrong', function () {
  let server: TestServer;
  const tenant = `clear-${randomUUID().slice(0, 8)}`;
  let tenantSecret: string;
  let hereSecret: string;

  before(async function () {
    server = await withServer();
    tenantSecret = await confidentialClient(server, 'clear-tenant-app', { scopes: ['read'] }, tenant);
    hereSecret = await confidentialClient(server, 'clear-here-app', {
      scopes: ['read'],
      redirectUris: [REDIRECT],
    });
  });

  describe('invalid_client to a request without X-Tenant-Id', function () {
    const HINT = /clients? of another tenant than the default one needs the X-Tenant-Id header/;
    const withoutHint = (answer: JsonResponse) => answer.body.error_description.replace(/ \(.*\)$/, '');

    it("hints at X-Tenant-Id at /token and /introspect, alike for another tenant's client, an unknown one and a wrong secret", async function () {
      const answers = [
        await clientCredentials(server, 'clear-tenant-app', tenantSecret, { scope: 'read' }),
        await clientCredentials(server, `clear-nobody-${randomUUID()}`, 'whatever', { scope: 'read' }),
        await clientCredentials(server, 'clear-here-app', 'a wrong secret', { scope: 'read' }),
        await postForm(
          server,
          '/token',
          { grant_type: 'client_credentials', client_id: 'clear-tenant-app', client_secret: tenantSecret },
          {},
        ),
        await postForm(
          server,
          '/introspect',
          { token: 'x' },
          { Authorization: basic('clear-tenant-app', tenantSecret) },
        ),
      ];
      for (const answer of answers) {
        expect(answer.status, JSON.stringify(answer.body)).to.equal(401);
        expect(answer.body.error).to.equal('invalid_client');
        expect(answer.body.error_description).to.match(HINT);
      }
      // The same words for all of them: nothing tells which client exists in which tenant.
      expect(new Set(answers.map((answer) => answer.body.error_description)).size).to.equal(1);
      expect(answers[0]!.body.error_description).not.to.contain(tenant);

      const named = await clientCredentials(
        server,
        'clear-tenant-app',
        tenantSecret,
        { scope: 'read' },
        {
          'X-Tenant-Id': tenant,
        },
      );
      expect(named.status, JSON.stringify(named.body)).to.equal(200);
      const wrongInTenant = await clientCredentials(
        server,
        'clear-tenant-app',
        'a wrong secret',
        {},
        {
          'X-Tenant-Id': tenant,
        },
      );
      expect(wrongInTenant.status).to.equal(401);
      expect(wrongInTenant.body.error_description, 'a request that named its tenant gets no hint').to.equal(
        withoutHint(answers[0]!),
      );
    });

    it("hints at X-Tenant-Id for Arbiter's own APIs' Basic callers too (AuthZEN)", async function () {
      const response = await server.request('/access/v1/evaluation', {
        method: 'POST',
        headers: { Authorization: basic('clear-tenant-app', tenantSecret) },
        json: { subject: { type: 'user', id: 'a' }, action: { name: 'read' }, resource: { type: 'doc', id: '1' } },
      });
      expect(response.status).to.equal(401);
      const body = (await response.json()) as { error: string; error_description: string };
      expect(body.error).to.equal('invalid_client');
      expect(body.error_description).to.match(HINT);
    });
  });

  describe('an unknown scope beside a known one', function () {
    it('is left out at /token, and the answer says which scopes were granted (RFC 6749 §3.3)', async function () {
      const answer = await clientCredentials(server, 'clear-here-app', hereSecret, { scope: 'read made-up-scope' });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      expect(answer.body.scope).to.equal('read');
      const alone = await clientCredentials(server, 'clear-here-app', hereSecret, { scope: 'made-up-scope' });
      expect(alone.status).to.equal(400);
      expect(alone.body.error).to.equal('invalid_scope');
    });

    it('is left out of an authorization, and the code exchange says which scopes were granted', async function () {
      const { server: signIn } = await withSignInServer();
      const redirectUri = 'http://127.0.0.1:1/clear-answers/callback';
      const spa = await registerPublicClient(signIn, redirectUri, {
        clientId: `clear-spa-${randomUUID().slice(0, 8)}`,
      });
      const request = await authorizationRequest(signIn, spa, { scope: 'openid made-up-scope email' });
      const agent = new FetchUserAgent();
      const loginPage = await agent.navigate(request.url, arrivingAt(redirectUri));
      const arrived = (await passDevIdpForms(agent, loginPage, 'clear-ada', arrivingAt(redirectUri))).url;
      expect(arrived.searchParams.get('code'), arrived.href).to.be.a('string');
      const tokens = await redeemCode(signIn, spa, arrived.searchParams.get('code')!, request.codeVerifier);
      expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
      expect(tokens.body.scope.split(' ').sort()).to.deep.equal(['email', 'openid']);
    });
  });

  describe('the page a browser gets when it cannot be sent back', function () {
    const authorize = (params: Record<string, string>, headers: Record<string, string> = {}) =>
      server.request(
        `/authorize?${new URLSearchParams({
          response_type: 'code',
          client_id: 'clear-here-app',
          redirect_uri: REDIRECT,
          scope: 'openid',
          state: 'st',
          ...params,
        })}`,
        { headers: { Accept: 'text/html', ...headers } },
      );

    it("is Arbiter's own, with the error, its description and the request id, and loads nothing", async function () {
      const response = await authorize(
        { redirect_uri: 'https://elsewhere.example.test/cb' },
        { 'X-Request-ID': 'clear-page-1' },
      );
      expect(response.status).to.equal(400);
      expect(response.headers.get('location')).to.equal(null);
      expect(response.headers.get('content-type')).to.match(/^text\/html/);
      const page = await response.text();
      expect(page).to.contain('<title>Arbiter: this request cannot continue</title>');
      expect(page).not.to.match(/oops/i);
      expect(page).to.contain('redirect_uri');
      expect(page).to.contain('<dt>Request id</dt><dd><code>clear-page-1</code></dd>');
      expect(response.headers.get('x-request-id')).to.equal('clear-page-1');
      const csp = response.headers.get('content-security-policy') ?? '';
      expect(csp)
        .to.match(/default-src 'none'/)
        .and.match(/style-src 'sha256-[^']+'/)
        .and.match(/frame-ancestors 'none'/);
      expect(page).not.to.match(/<script|<link|src=|href=/);
    });

    it('escapes what the request put in it, and shows a generated request id when none was sent', async function () {
      const response = await authorize({
        client_id: `<script>alert(1)</script>-${randomUUID()}`,
        redirect_uri: 'https://x.example.test/"><img src=x>',
      });
      const page = await response.text();
      expect(response.status).to.equal(400);
      expect(page).not.to.contain('<script>alert').and.not.to.contain('<img');
      const generated = response.headers.get('x-request-id')!;
      expect(generated).to.match(/^[0-9a-f-]{36}$/);
      expect(page).to.contain(`<code>${generated}</code>`);
      // An unknown client without X-Tenant-Id: the page carries the same hint as /token.
      expect(page).to.contain('invalid_client').and.to.contain('X-Tenant-Id');
    });
  });
});
