import { expect } from 'chai';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, startRegisteredDevIdp, type RegisteredDevIdp } from '../support/dev-idp.js';
import {
  basic,
  clientWithToken,
  confidentialClient,
  FORM,
  policyInForce,
  postForm,
  updateOauthData,
} from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

const REDIRECT_URI = 'http://127.0.0.1:1/several/callback';
const CLIENT_ID = 'several-spa';
const LEDGER = 'https://ledger.several.example.test/';
const MAIL = 'https://mail.several.example.test/';
const LEDGER_TYPE = 'urn:example:several:ledger';
const MAIL_TYPE = 'urn:example:several:mail';
const OTHER_TENANT = 'several-other';
const OTHER_TENANTS_API = 'https://other-tenant.several.example.test/';

/**
 * RFC 8707 §2 with several `resource` parameters: the authorize decision covers every resource
 * (each resolved to its type), the code and refresh token keep the set, and each token request
 * names one of them and gets a token for it alone, with the scopes the policy granted for it.
 */
describe('Several resource indicators (RFC 8707)', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let introspector: string;
  let serviceSecret: string;
  let exchangerSecret: string;
  const agent = new FetchUserAgent();

  before(async function () {
    // Its own server: the test adds resource types to the shared policy data.
    server = await readyServer();
    idp = await startRegisteredDevIdp(server);
    await updateOauthData(server, (data) => {
      data.resource_types[LEDGER_TYPE] = { scopes: ['ledger.read', 'ledger.write'] };
      data.resource_types[MAIL_TYPE] = { scopes: ['mail.send'] };
    });
    for (const [resourceIndicator, type] of [
      [LEDGER, LEDGER_TYPE],
      [MAIL, MAIL_TYPE],
    ])
      expect(
        (await server.admin('POST', '/resource-servers', { resourceIndicator, typeUris: [type] })).status,
      ).to.equal(201);
    // The same URI of another tenant's, typed there: it must not resolve here.
    const elsewhere = await server.admin('POST', '/resource-servers', {
      resourceIndicator: OTHER_TENANTS_API,
      typeUris: [LEDGER_TYPE],
      tenantId: OTHER_TENANT,
    });
    expect(elsewhere.status).to.equal(201);
    const created = await server.admin('POST', '/clients', {
      clientId: CLIENT_ID,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [REDIRECT_URI],
      scopes: ['openid', 'profile', 'email', 'ledger.read', 'mail.send'],
    });
    expect(created.status).to.equal(201);
    serviceSecret = await confidentialClient(server, 'several-svc', { scopes: ['ledger.read', 'mail.send'] });
    exchangerSecret = await confidentialClient(server, 'several-exchanger', { scopes: ['ledger.read'] });
    introspector = (await clientWithToken(server, 'several-rs', ['introspection'])).token;
  });
  after(async function () {
    await idp?.close();
    await server?.close();
  });

  /** An authorization request for several resources; signs in the first time (the agent keeps the session). */
  async function authorize(scope: string, resources: string[]): Promise<{ url: URL; verifier: string }> {
    const verifier = client.randomPKCECodeVerifier();
    const page = await agent.navigate(
      `${server.config.issuer}/authorize?${await authorizationQuery(scope, resources, verifier)}`,
      arrivingAt(REDIRECT_URI),
    );
    const done = page.url.href.startsWith(REDIRECT_URI)
      ? page
      : await passDevIdpForms(agent, page, 'erin', arrivingAt(REDIRECT_URI));
    return { url: done.url, verifier };
  }

  async function authorizationQuery(scope: string, resources: string[], verifier: string): Promise<URLSearchParams> {
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: CLIENT_ID,
      redirect_uri: REDIRECT_URI,
      scope,
      state: client.randomState(),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    for (const resource of resources) query.append('resource', resource);
    return query;
  }

  async function codeFor(scope: string, resources: string[]): Promise<{ code: string; verifier: string }> {
    const { url, verifier } = await authorize(scope, resources);
    const code = url.searchParams.get('code');
    if (!code) throw new Error(`no code: ${url.href}`);
    return { code, verifier };
  }

  /** POST /token with a form whose parameters may repeat. */
  async function token(
    form: [string, string][],
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: any }> {
    const response = await server.request('/token', {
      method: 'POST',
      headers: { ...FORM, ...headers },
      body: new URLSearchParams(form).toString(),
    });
    return { status: response.status, body: await response.json() };
  }

  const redeem = (code: string, verifier: string, ...resources: string[]) =>
    token([
      ['grant_type', 'authorization_code'],
      ['code', code],
      ['redirect_uri', REDIRECT_URI],
      ['client_id', CLIENT_ID],
      ['code_verifier', verifier],
      ...resources.map((resource): [string, string] => ['resource', resource]),
    ]);
  const refresh = (refreshToken: string, extra: [string, string][]) =>
    token([['grant_type', 'refresh_token'], ['refresh_token', refreshToken], ['client_id', CLIENT_ID], ...extra]);
  const introspect = async (accessToken: string) =>
    (await postForm(server, '/introspect', { token: accessToken }, { Authorization: `Bearer ${introspector}` })).body;
  /** The newest audit entry of a decision at `endpoint` (the authorize decision is taken at /authorize/<uid>). */
  const lastDecision = async (endpoint: string) =>
    (await server.admin('GET', '/audit-logs?size=50&sort=id,desc')).body.content.find(
      (entry: any) => entry.endpoint.startsWith(endpoint) && entry.policyInput,
    );

  describe('the authorization covers every resource', function () {
    it('asks the authorize decision about every resource, each resolved to its type, and each gets its own scopes', async function () {
      await codeFor('openid ledger.read mail.send', [LEDGER, MAIL]);
      const entry = await lastDecision('/authorize');
      expect(entry.policyInput.request.resources).to.deep.equal([
        { resource: LEDGER, resolved_resource_type: LEDGER_TYPE },
        { resource: MAIL, resolved_resource_type: MAIL_TYPE },
      ]);
      expect(entry.policyInput.request.resource, 'no single resource').to.equal(null);
      expect(entry.policyDecision.resources).to.deep.equal([
        { resource: LEDGER, scopes: ['ledger.read'] },
        { resource: MAIL, scopes: ['mail.send'] },
      ]);
      const requests = (await server.admin('GET', '/audit-logs?endpoint=/authorize&size=20&sort=id,desc')).body.content;
      expect(
        requests.map((audited: any) => audited.requestSummary?.resource),
        'the audit entry of the request lists every resource',
      ).to.deep.include([LEDGER, MAIL]);
    });

    it('issues per token request a token for the named resource alone, with the scopes granted for it', async function () {
      const { code, verifier } = await codeFor('openid ledger.read mail.send', [LEDGER, MAIL]);
      const ledger = await redeem(code, verifier, LEDGER);
      expect(ledger.status, JSON.stringify(ledger.body)).to.equal(200);
      expect(ledger.body.scope).to.equal('ledger.read');
      expect(ledger.body.id_token, 'the code exchange still signs the user in').to.be.a('string');
      expect(ledger.body.refresh_token).to.be.a('string');
      const ledgerSeen = await introspect(ledger.body.access_token);
      expect(ledgerSeen.active).to.equal(true);
      expect([ledgerSeen.aud, ledgerSeen.resource].flat()).to.include(LEDGER);
      expect(JSON.stringify(ledgerSeen)).not.to.contain(MAIL);
      expect(ledgerSeen.scope).to.equal('ledger.read');

      const tokenInput = (await lastDecision('/token')).policyInput.request;
      expect(tokenInput.resource, 'the token decision is asked about the named resource').to.equal(LEDGER);
      expect(tokenInput.resources).to.deep.equal([{ resource: LEDGER, resolved_resource_type: LEDGER_TYPE }]);
      expect([...tokenInput.scopes].sort(), "the scopes held for it, not the other resource's").to.deep.equal([
        'ledger.read',
        'openid',
      ]);

      // The refresh token remembers the set: each refresh names one of its resources.
      const mail = await refresh(ledger.body.refresh_token, [['resource', MAIL]]);
      expect(mail.status, JSON.stringify(mail.body)).to.equal(200);
      expect(mail.body.scope).to.equal('mail.send');
      const mailSeen = await introspect(mail.body.access_token);
      expect([mailSeen.aud, mailSeen.resource].flat()).to.include(MAIL);
      expect(mailSeen.scope).to.equal('mail.send');
      const again = await refresh(mail.body.refresh_token, [['resource', LEDGER]]);
      expect(again.status, JSON.stringify(again.body)).to.equal(200);
      expect(again.body.scope).to.equal('ledger.read');
    });

    it('refuses the whole request with invalid_target when one resource would be refused alone', async function () {
      // mail.send-less: the mail resource can be granted none of the requested scopes.
      const { url } = await authorize('ledger.read', [LEDGER, MAIL]);
      expect(url.searchParams.get('code')).to.equal(null);
      expect(url.searchParams.get('error')).to.equal('invalid_target');
      expect(url.searchParams.get('error_description')).to.contain(MAIL);
    });

    it('keeps a resource granted none of its scopes when openid was asked for, as alone (an audience only)', async function () {
      const { url } = await authorize('openid ledger.read', [LEDGER, MAIL]);
      expect(url.searchParams.get('code'), url.href).to.be.a('string');
      const decision = (await lastDecision('/authorize')).policyDecision;
      expect(decision.resources).to.deep.equal([
        { resource: LEDGER, scopes: ['ledger.read'] },
        { resource: MAIL, scopes: [] },
      ]);
    });

    it('refuses invalid_target when an allow does not answer for every requested resource (a policy written for one)', async function () {
      const rules = (await server.admin('GET', '/policy-rules')).body as any[];
      const rule = rules.find((candidate) => /^package arbiter\.authorize\b/m.test(candidate.content));
      const forOne =
        'package arbiter.authorize\n\ndecision := {"allow": true, "scopes": ["openid", "ledger.read", "mail.send"]}\n';
      expect(
        (await server.admin('PUT', `/policy-rules/${rule.id}`, { ...writable(rule), content: forOne })).status,
      ).to.equal(200);
      try {
        await policyInForce(server);
        const several = await authorize('openid ledger.read mail.send', [LEDGER, MAIL]);
        expect(several.url.searchParams.get('error'), several.url.href).to.equal('invalid_target');
        const one = await authorize('openid ledger.read mail.send', [LEDGER]);
        expect(one.url.searchParams.get('code'), 'one resource: the scopes are its own, as before').to.be.a('string');
      } finally {
        expect((await server.admin('PUT', `/policy-rules/${rule.id}`, writable(rule))).status).to.equal(200);
        await policyInForce(server);
      }
    });

    it('resolves each resource in the request tenant only: another tenant’s resource server is unknown here', async function () {
      await codeFor('openid ledger.read', [LEDGER, OTHER_TENANTS_API]);
      const entry = await lastDecision('/authorize');
      expect(entry.policyInput.request.resources).to.deep.equal([
        { resource: LEDGER, resolved_resource_type: LEDGER_TYPE },
        { resource: OTHER_TENANTS_API, resolved_resource_type: null },
      ]);
    });
  });

  describe('hostile authorization requests', function () {
    /** The error an authorization request is redirected back with, before any sign-in. */
    async function refusal(resources: string[]): Promise<URLSearchParams> {
      const verifier = client.randomPKCECodeVerifier();
      const response = await server.request(`/authorize?${await authorizationQuery('openid', resources, verifier)}`);
      expect(response.status, resources.join(' ')).to.equal(302);
      const location = new URL(response.headers.get('location')!);
      expect(location.href.startsWith(REDIRECT_URI), location.href).to.equal(true);
      return location.searchParams;
    }

    it(`refuses more than 10 resources with invalid_target`, async function () {
      const many = Array.from({ length: 11 }, (_, index) => `https://api${index}.several.example.test/`);
      const answer = await refusal(many);
      expect(answer.get('error')).to.equal('invalid_target');
      expect(answer.get('error_description')).to.contain('at most 10');
    });

    it('refuses the same resource twice with invalid_request', async function () {
      const answer = await refusal([LEDGER, MAIL, LEDGER]);
      expect(answer.get('error')).to.equal('invalid_request');
      expect(answer.get('error_description')).to.contain('more than once');
    });

    it('refuses a resource with a fragment or a relative one among several with invalid_target', async function () {
      for (const malformed of [`${MAIL}#part`, '/relative/api', 'not a uri']) {
        expect((await refusal([LEDGER, malformed])).get('error'), malformed).to.equal('invalid_target');
      }
    });

    it('lets only resource repeat at /authorize', async function () {
      const response = await server.request(
        `/authorize?client_id=${CLIENT_ID}&response_type=code&scope=openid&scope=profile&redirect_uri=${encodeURIComponent(REDIRECT_URI)}`,
      );
      expect(response.status).to.equal(400);
      expect(((await response.json()) as any).error_description).to.contain("'scope' was given more than once");
    });
  });

  describe('hostile token requests', function () {
    let code: string;
    let verifier: string;
    before(async function () {
      ({ code, verifier } = await codeFor('openid ledger.read mail.send', [LEDGER, MAIL]));
    });

    it('refuses with invalid_target a resource outside the set, several resources, a malformed one and none at all, and the code stays usable', async function () {
      for (const resources of [
        ['https://elsewhere.several.example.test/'],
        [OTHER_TENANTS_API],
        [LEDGER, MAIL],
        [LEDGER, LEDGER],
        [`${LEDGER}#x`],
        ['relative/path'],
        [],
      ]) {
        const { status, body } = await redeem(code, verifier, ...resources);
        expect(status, resources.join(' ')).to.equal(400);
        expect(body.error, resources.join(' ')).to.equal('invalid_target');
      }
      const named = await redeem(code, verifier, MAIL);
      expect(named.status, JSON.stringify(named.body)).to.equal(200);
      expect(named.body.scope).to.equal('mail.send');
    });

    it("refuses a refresh asking one resource for another's scope, and a refresh naming none", async function () {
      const issued = await codeFor('openid ledger.read mail.send', [LEDGER, MAIL]);
      const tokens = (await redeem(issued.code, issued.verifier, LEDGER)).body;
      const crossed = await refresh(tokens.refresh_token, [
        ['resource', LEDGER],
        ['scope', 'mail.send'],
      ]);
      expect(crossed.status).to.equal(400);
      expect(crossed.body.error).to.equal('invalid_scope');
      const unnamed = await refresh(tokens.refresh_token, []);
      expect(unnamed.body.error).to.equal('invalid_target');
      const many = await refresh(tokens.refresh_token, [
        ['resource', LEDGER],
        ['resource', MAIL],
      ]);
      expect(many.body.error).to.equal('invalid_target');
      const stillGood = await refresh(tokens.refresh_token, [['resource', MAIL]]);
      expect(stillGood.status, 'refused refreshes did not cost the refresh token').to.equal(200);
    });

    it("refuses the code at another tenant's /token", async function () {
      const issued = await codeFor('openid ledger.read mail.send', [LEDGER, MAIL]);
      const { status, body } = await token(
        [
          ['grant_type', 'authorization_code'],
          ['code', issued.code],
          ['redirect_uri', REDIRECT_URI],
          ['client_id', CLIENT_ID],
          ['code_verifier', issued.verifier],
          ['resource', LEDGER],
        ],
        { 'X-Tenant-Id': OTHER_TENANT },
      );
      expect(status).to.be.oneOf([400, 401]);
      expect(body.error).to.be.oneOf(['invalid_grant', 'invalid_client']);
    });
  });

  describe('client_credentials', function () {
    const credentials = (...resources: string[]) =>
      token(
        [
          ['grant_type', 'client_credentials'],
          ['scope', 'ledger.read mail.send'],
          ...resources.map((resource): [string, string] => ['resource', resource]),
        ],
        { Authorization: basic('several-svc', serviceSecret) },
      );

    it('issues a token for one resource, with its scopes', async function () {
      const { status, body } = await credentials(LEDGER);
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.scope).to.equal('ledger.read');
    });

    it('leaves token exchange its single resource: a repeated one is invalid_request', async function () {
      const { status, body } = await token(
        [
          ['grant_type', 'urn:ietf:params:oauth:grant-type:token-exchange'],
          ['subject_token', 'some-token'],
          ['subject_token_type', 'urn:ietf:params:oauth:token-type:access_token'],
          ['resource', LEDGER],
          ['resource', MAIL],
        ],
        { Authorization: basic('several-exchanger', exchangerSecret) },
      );
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_request');
      expect(body.error_description).to.contain('resource');
    });

    it('refuses several resources with invalid_target, before asking the policy', async function () {
      for (const resources of [
        [LEDGER, MAIL],
        [LEDGER, LEDGER],
      ]) {
        const { status, body } = await credentials(...resources);
        expect(status).to.equal(400);
        expect(body.error).to.equal('invalid_target');
        expect(body.error_description).to.contain('one resource');
      }
    });
  });
});

/** The writable fields of a policy rule record. */
function writable(rule: any): Record<string, unknown> {
  return { version: rule.version, kind: rule.kind, path: rule.path, content: rule.content, enabled: rule.enabled };
}
