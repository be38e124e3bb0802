import { expect } from 'chai';
import * as client from 'openid-client';
import { FetchUserAgent, type Page } from '../support/browser.js';
import { passDevIdpForms, startRegisteredDevIdp, withSignInServer, type RegisteredDevIdp } from '../support/dev-idp.js';
import { eventually, policyInForce, postForm } from '../support/oauth.js';
import { readyServer, withServer, type TestServer } from '../support/server.js';

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const TENANT = 'device-acme';
const REFUSED = 'device-refused-tv';
const REFUSE_PATH = 'arbiter/device-flow-test.cedar';
// Cedar decides every token request once a policy names the action (its principal is the user
// here): permit them all, as the Cedar pack does, and forbid the one client's.
const REFUSE = `@id("device-test-token-by-rego")
permit (principal, action == Arbiter::Action::"token", resource);
@id("no-device-tokens-for-${REFUSED}")
@error("access_denied")
@error_description("this device may not have tokens")
forbid (principal, action == Arbiter::Action::"token", resource)
when { context has client && context.client.client_id == "${REFUSED}" };
`;

interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/** A public client registered for the device grant only (no redirect URI). */
async function registerDevice(server: TestServer, clientId: string, tenantId?: string): Promise<void> {
  const created = await server.admin('POST', '/clients', {
    clientId,
    clientType: 'public',
    tokenEndpointAuthMethod: 'none',
    grantTypes: [DEVICE_GRANT],
    scopes: ['openid', 'profile', 'channels.read'],
    ...(tenantId ? { tenantId } : {}),
  });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
}

async function deviceAuthorization(
  server: TestServer,
  clientId: string,
  prefix = '',
  scope = 'openid profile',
): Promise<DeviceAuthorization> {
  const { status, body } = await postForm(server, `${prefix}/device/auth`, { client_id: clientId, scope });
  expect(status, JSON.stringify(body)).to.equal(200);
  return body;
}

function poll(server: TestServer, clientId: string, deviceCode: string, prefix = '') {
  return postForm(server, `${prefix}/token`, {
    grant_type: DEVICE_GRANT,
    device_code: deviceCode,
    client_id: clientId,
  });
}

/** Enters the user code on our page and answers the confirmation with `fields` (confirm, or abort). */
async function enterCode(agent: FetchUserAgent, started: DeviceAuthorization): Promise<Page> {
  const input = await agent.navigate(started.verification_uri);
  expect(input.status).to.equal(200);
  expect(input.body).to.contain('name="user_code"');
  return agent.submitForm(input, { user_code: started.user_code });
}

/**
 * The whole person's side: code (typed, or pre-filled by verification_uri_complete, whose page
 * posts it on), confirmation, sign-in at the dev IdP, back to our success page.
 */
async function approve(started: DeviceAuthorization, { complete = false } = {}): Promise<Page> {
  const agent = new FetchUserAgent();
  const confirmation = complete
    ? await agent.submitForm(await agent.navigate(started.verification_uri_complete), {})
    : await enterCode(agent, started);
  expect(confirmation.body).to.contain('Allow this device?');
  const login = await agent.submitForm(confirmation, {});
  expect(login.body, 'the dev IdP login form').to.contain('name="login"');
  return passDevIdpForms(agent, login, 'alice', () => false);
}

describe('RFC 8628 device authorization grant', function () {
  let server: TestServer;

  before(async function () {
    ({ server } = await withSignInServer());
    await registerDevice(server, 'device-tv');
    await registerDevice(server, REFUSED);
  });

  it('advertises the device authorization endpoint and device grant in the metadata', async function () {
    const metadata = (await (await server.request('/.well-known/oauth-authorization-server')).json()) as any;
    expect(metadata.device_authorization_endpoint).to.equal(`${server.config.issuer}/device/auth`);
    expect(metadata.grant_types_supported).to.include(DEVICE_GRANT);
  });

  it('signs the user in through the upstream IdP after our code and confirmation pages; the device polls for tokens', async function () {
    const started = await deviceAuthorization(server, 'device-tv');
    expect(started.user_code).to.match(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(started.verification_uri).to.equal(`${server.config.issuer}/device`);
    expect(started.interval).to.equal(5);

    const pending = await poll(server, 'device-tv', started.device_code);
    expect(pending.status).to.equal(400);
    expect(pending.body.error).to.equal('authorization_pending');
    // Within the interval again: slow_down (bounded: the machine may be slow enough to leave the window).
    let slowed = false;
    for (let tries = 0; tries < 5 && !slowed; tries += 1)
      slowed = (await poll(server, 'device-tv', started.device_code)).body.error === 'slow_down';
    expect(slowed, 'slow_down when polled within the interval').to.equal(true);

    const agent = new FetchUserAgent();
    const confirmation = await enterCode(agent, started);
    expect(confirmation.body)
      .to.contain('device-tv')
      .and.contain('<code>openid</code>')
      .and.contain('<code>profile</code>');
    expect(confirmation.body).to.contain(started.user_code);
    const login = await agent.submitForm(confirmation, {});
    const done = await passDevIdpForms(agent, login, 'alice', () => false);
    expect(done.status).to.equal(200);
    expect(done.body).to.contain('Device connected');

    const issued = await poll(server, 'device-tv', started.device_code);
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    const again = await poll(server, 'device-tv', started.device_code);
    expect(again.body.error, 'a device code is redeemed once').to.equal('invalid_grant');

    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=20&sort=id,desc')).body.content.filter(
      (candidate: any) =>
        candidate.policyInput?.request?.grant_type === DEVICE_GRANT && candidate.policyDecision?.allow,
    );
    expect(entry, 'the token decision is audited').to.not.equal(undefined);
    expect(entry.policyInput.subject.sub).to.be.a('string');
    expect(entry.policyDecision.scopes).to.include('openid');
    const recent = (await server.admin('GET', '/audit-logs?size=100&sort=id,desc')).body.content as any[];
    expect(recent.some((each) => each.endpoint === '/device/auth' && each.clientId === 'device-tv')).to.equal(true);
    expect(JSON.stringify(recent), 'no code in the audit log').not.to.contain(started.device_code);
    expect(JSON.stringify(recent)).not.to.contain(started.user_code);
  });

  it('issues what the token policy granted, with an ID token for the signed-in user (code given by verification_uri_complete)', async function () {
    const started = await deviceAuthorization(
      server,
      'device-tv',
      '',
      'openid profile channels.read unregistered.scope',
    );
    expect((await approve(started, { complete: true })).body).to.contain('Device connected');
    const { status, body } = await poll(server, 'device-tv', started.device_code);
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body.token_type).to.equal('Bearer');
    expect(body.access_token).to.be.a('string');
    expect(body.id_token).to.be.a('string');
    // The client's own scope is granted; one it is not registered for is not.
    expect(body.scope.split(' ').sort()).to.deep.equal(['channels.read', 'openid', 'profile']);
    const userinfo = await server.request('/userinfo', { headers: { Authorization: `Bearer ${body.access_token}` } });
    expect(userinfo.status).to.equal(200);
  });

  it('serves openid-client 6 (a real device client): initiate, the user approves, its polling gets the tokens', async function () {
    const configuration = await client.discovery(new URL(server.config.issuer), 'device-tv', undefined, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    const started = await client.initiateDeviceAuthorization(configuration, { scope: 'openid profile' });
    // openid-client waits `interval` seconds before each poll, so the user is done before it asks.
    const polled = client.pollDeviceAuthorizationGrant(configuration, started);
    await approve(started as unknown as DeviceAuthorization);
    const tokens = await polled;
    expect(tokens.access_token).to.be.a('string');
    expect(tokens.claims()?.sub).to.be.a('string');
  });

  it('answers access_denied once the user refuses on the confirmation page', async function () {
    const started = await deviceAuthorization(server, 'device-tv');
    const agent = new FetchUserAgent();
    const confirmation = await enterCode(agent, started);
    const refused = await agent.submitForm(confirmation, { abort: 'yes' });
    expect(refused.body).to.contain('You refused the request');
    const { status, body } = await poll(server, 'device-tv', started.device_code);
    expect(status).to.equal(400);
    expect(body.error).to.equal('access_denied');
  });

  it('refuses a form without its CSRF token, and an unknown code, on the code page', async function () {
    const started = await deviceAuthorization(server, 'device-tv');
    const forged = await server.request('/device', {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ user_code: started.user_code, confirm: 'yes' }).toString(),
    });
    expect(forged.status).to.equal(400);
    expect(await forged.text()).to.contain('This form has expired');
    // With a session but without its CSRF token: oidc-provider's check, the page again.
    const agent = new FetchUserAgent();
    const input = await agent.navigate(started.verification_uri);
    const withoutToken = await agent.submitForm(
      { ...input, body: input.body!.replace(/name="xsrf" value="[^"]*"/, 'name="xsrf" value=""') },
      {
        user_code: started.user_code,
      },
    );
    expect(withoutToken.status).to.equal(400);
    expect(withoutToken.body).to.contain('This form has expired');
    expect((await poll(server, 'device-tv', started.device_code)).body.error).to.be.oneOf([
      'authorization_pending',
      'slow_down',
    ]);
    const wrong = await agent.submitForm(await agent.navigate(started.verification_uri), { user_code: 'BBBB-BBBB' });
    expect(wrong.body).to.contain('That code is not valid');
  });

  it('refuses a client that is not registered for the device grant', async function () {
    const created = await server.admin('POST', '/clients', {
      clientId: 'device-not-registered',
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: ['http://127.0.0.1:1/device/cb'],
      scopes: ['openid'],
    });
    expect(created.status).to.equal(201);
    const { status, body } = await postForm(server, '/device/auth', {
      client_id: 'device-not-registered',
      scope: 'openid',
    });
    expect(status, JSON.stringify(body)).to.equal(400);
    expect(body.error).to.equal('unauthorized_client');
  });

  it('lets the token policy refuse the device grant for one client, after the user approved', async function () {
    const created = await server.admin('POST', '/policy-rules', {
      version: null,
      kind: 'cedar',
      path: REFUSE_PATH,
      content: REFUSE,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    try {
      await policyInForce(server);
      const started = await deviceAuthorization(server, REFUSED);
      await approve(started);
      const { status, body } = await poll(server, REFUSED, started.device_code);
      expect(status).to.equal(400);
      expect(body).to.include({ error: 'access_denied', error_description: 'this device may not have tokens' });
      // The other device client is still granted.
      const other = await deviceAuthorization(server, 'device-tv');
      await approve(other);
      const granted = await poll(server, 'device-tv', other.device_code);
      expect(granted.status, JSON.stringify(granted.body)).to.equal(200);
    } finally {
      const rules = (await server.admin('GET', '/policy-rules')).body as any[];
      for (const rule of rules.filter((each) => each.path === REFUSE_PATH))
        expect((await server.admin('DELETE', `/policy-rules/${rule.id}`)).status).to.equal(204);
      await policyInForce(server);
    }
  });

  it('tells the user and the device when the upstream sign-in fails', async function () {
    const tenant = 'device-broken';
    // The identity provider is registered with a wrong client secret: its code cannot be redeemed.
    const broken = await startRegisteredDevIdp(server, {
      tenantId: tenant,
      tenantPath: true,
      idpId: 'device-broken-idp',
      clientSecret: 'not-the-dev-idp-secret',
    });
    try {
      await registerDevice(server, 'device-tv', tenant);
      const prefix = `/t/${tenant}`;
      const started = await deviceAuthorization(server, 'device-tv', prefix);
      const page = await approve(started);
      expect(page.body).to.contain('The sign-in did not complete');
      const { status, body } = await poll(server, 'device-tv', started.device_code, prefix);
      expect(status).to.equal(400);
      expect(body.error).to.be.a('string').and.not.be.oneOf(['authorization_pending', 'slow_down', 'invalid_grant']);
      const escaped = String(body.error_description).replace(/[&<>"'/]/g, (char) => `&#${char.charCodeAt(0)};`);
      expect(page.body, 'the page says why, as the device is told').to.contain(escaped);
    } finally {
      await broken.close();
    }
  });

  describe('in a tenant', function () {
    let idp: RegisteredDevIdp;

    before(async function () {
      idp = await startRegisteredDevIdp(server, { tenantId: TENANT, tenantPath: true, idpId: 'device-idp' });
      await registerDevice(server, 'device-tv', TENANT);
    });
    after(async function () {
      await idp?.close();
    });

    it('publishes the endpoint per tenant, by X-Tenant-Id and by path', async function () {
      const byHeader = (await (
        await server.request('/.well-known/openid-configuration', { headers: { 'X-Tenant-Id': TENANT } })
      ).json()) as any;
      expect(byHeader.device_authorization_endpoint).to.equal(`${server.config.issuer}/device/auth`);
      const byPath = (await (await server.request(`/t/${TENANT}/.well-known/openid-configuration`)).json()) as any;
      expect(byPath.device_authorization_endpoint).to.equal(`${server.config.issuer}/t/${TENANT}/device/auth`);
    });

    it("runs the whole flow at the tenant's own issuer; its device code is unknown to the default tenant", async function () {
      const prefix = `/t/${TENANT}`;
      const started = await deviceAuthorization(server, 'device-tv', prefix);
      expect(started.verification_uri).to.equal(`${server.config.issuer}${prefix}/device`);
      await approve(started);
      expect((await poll(server, 'device-tv', started.device_code)).body.error).to.equal('invalid_grant');
      const { status, body } = await poll(server, 'device-tv', started.device_code, prefix);
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.access_token).to.be.a('string');
    });
  });
});

describe('RFC 8628 device codes: expiry and user code guessing', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: device codes that live one second, and a low failure limit for guessing.
    server = await withServer({ DEVICE_CODE_TTL_SECONDS: '1', AUTH_FAILURE_LIMIT: '3' });
    await registerDevice(server, 'device-short');
  });

  it('answers expired_token once the device code has expired, and the code page says so', async function () {
    const started = await deviceAuthorization(server, 'device-short');
    expect(started.expires_in).to.be.at.most(1);
    await eventually(
      async () => (await poll(server, 'device-short', started.device_code)).body.error === 'expired_token',
      10_000,
      500,
    );
    const agent = new FetchUserAgent();
    const input = await agent.navigate(started.verification_uri);
    const late = await agent.submitForm(input, { user_code: started.user_code });
    expect(late.body).to.contain('That code has expired');
  });

  it('slows user code guessing: past the limit an address gets 429 without any code looked up', async function () {
    const agent = new FetchUserAgent();
    let page = await agent.navigate(`${server.config.issuer}/device`);
    // The limit is 3 for the address (the test before may have spent one): a 429 comes by the fourth guess.
    let answered = 0;
    for (const last of 'CDFG') {
      page = await agent.submitForm(page, { user_code: `BBBB-BBB${last}` });
      if (page.status === 429) break;
      answered += 1;
      expect(page.status).to.equal(200);
      expect(page.body).to.contain('That code is not valid');
    }
    expect(page.status).to.equal(429);
    expect(answered).to.be.at.most(3);
    expect(page.body).to.contain('Too many codes tried');
  });
});

describe('RFC 8628 user code guesses sent at once', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: an address of its own count, and a low failure limit.
    server = await readyServer({ AUTH_FAILURE_LIMIT: '3' });
  });
  after(async function () {
    await server?.close();
  });

  it('looks up no more codes than the limit, however many guesses arrive together (found 2026-11-30: one more)', async function () {
    const agent = new FetchUserAgent();
    const page = await agent.navigate(`${server.config.issuer}/device`);
    const letters = 'BCDFGHJKLMNPQRSTVWXZ';
    const guesses = Array.from({ length: 40 }, (_, at) => `BBBB-B${letters[Math.floor(at / 20)]}${letters[at % 20]}B`);
    const pages = await Promise.all(guesses.map((user_code) => agent.submitForm(page, { user_code })));
    const lookedUp = pages.filter((each) => each.status === 200 && each.body!.includes('That code is not valid'));
    expect(lookedUp.length).to.equal(3);
    expect(pages.filter((each) => each.status === 429)).to.have.length(37);
  });
});
