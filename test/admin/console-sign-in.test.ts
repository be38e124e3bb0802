import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { ADMIN_SESSIONS_COLLECTION } from '../../src/admin/index.js';
import { DEV_IDP_CLIENT, startDevIdp } from '../../src/dev-idp/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import { FetchUserAgent } from '../support/browser.js';
import { passDevIdpForms, registerIdentityProvider } from '../support/dev-idp.js';
import { freePort, readyServer, type TestServer } from '../support/server.js';
import { rawRequest } from '../support/raw-http.js';
import { IDENTITY_WIDE_FACTOR } from '../../src/http/auth-failures.js';

/**
 * Operators sign in as they do elsewhere (issue 37, point 5): the console signs in through an
 * upstream OpenID provider (code flow, PKCE), the role and tenants come from a claim mapped by
 * ADMIN_SIGN_IN_GRANTS, the session is an HttpOnly cookie the Admin API takes in place of a key,
 * every call it makes is audited under the operator's name. A real oidc-provider (the dev IdP)
 * plays the operators' identity provider.
 */
const FAILURE_LIMIT = 2;

describe('Console sign-in through an upstream OpenID provider', function () {
  let server: TestServer;
  let idp: { close(): Promise<void> };
  let idpPort: number;

  before(async function () {
    idpPort = await freePort();
    const serverPort = await freePort();
    const issuer = `http://127.0.0.1:${serverPort}`;
    idp = await startDevIdp({ port: idpPort, redirectUris: [`${issuer}/admin/sign-in/callback`] });
    // Its own server: sign-in settings of its own.
    server = await readyServer({
      PORT: String(serverPort),
      ISSUER: issuer,
      ADMIN_SIGN_IN_IDP: 'operators',
      ADMIN_SIGN_IN_CLAIM: 'preferred_username',
      ADMIN_SIGN_IN_GRANTS: JSON.stringify({
        alice: { role: 'admin' },
        bob: { role: 'read-only', tenants: ['acme'] },
      }),
      // Small, for the lockout test below (AUTH_FAILURE_LIMIT × 10 failures lock an identity everywhere).
      AUTH_FAILURE_LIMIT: String(FAILURE_LIMIT),
    });
    await registerIdentityProvider(server, `http://localhost:${idpPort}`, { idpId: 'operators' });
  });
  after(async function () {
    await server?.close();
    await idp?.close();
  });

  const atConsole = (url: URL) => url.host === new URL(server.url).host && url.pathname === '/admin';

  /** Signs `login` in through the dev IdP; answers the agent (holding the session cookie) and where it stopped. */
  async function signIn(login: string) {
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(`${server.url}/admin/sign-in`, atConsole);
    expect(loginPage.url.host, 'sent to the identity provider').to.equal(`localhost:${idpPort}`);
    const back = await passDevIdpForms(agent, loginPage, login, atConsole);
    return { agent, back };
  }

  const cookieOf = (agent: FetchUserAgent) =>
    (agent as unknown as { cookieHeader(url: URL): string }).cookieHeader(new URL(`${server.url}/admin/api`));

  it('signs an operator in with the role the claim maps to, and the Admin API takes the session', async function () {
    const { agent, back } = await signIn('alice');
    expect(back.url.pathname).to.equal('/admin');
    expect(back.url.searchParams.get('signed-in')).to.equal('session');
    const cookie = cookieOf(agent);
    expect(cookie).to.match(/^arbiter_admin_session=[\w-]{43}$/);

    const current = await fetch(`${server.url}/admin/api/api-keys/current`, { headers: { cookie } });
    expect(current.status).to.equal(200);
    // A session, not the bootstrap key (found 2026-11-29: both were id null, and a session was called the bootstrap key).
    expect(await current.json()).to.include({
      name: 'operators:alice',
      role: 'admin',
      session: true,
      bootstrap: false,
    });

    // A write needs the console's header besides the cookie: no other site can make a browser send it.
    const body = JSON.stringify({ clientId: 'sso-made', clientType: 'public', grantTypes: ['authorization_code'] });
    const bare = await fetch(`${server.url}/admin/api/clients`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json' },
      body,
    });
    expect(bare.status).to.equal(403);
    const made = await fetch(`${server.url}/admin/api/clients`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json', 'x-arbiter-console': '1' },
      body: JSON.stringify({
        clientId: 'sso-made',
        clientType: 'public',
        tokenEndpointAuthMethod: 'none',
        redirectUris: ['https://app.example/cb'],
        scopes: ['openid'],
      }),
    });
    expect(made.status, await made.clone().text()).to.equal(201);

    // The audit names the operator, and the client written (found 2026-11-29: only a client_id parameter did).
    const entries = (await server.admin('GET', '/audit-logs?clientId=sso-made&size=20')).body.content;
    expect(entries.map((entry: any) => [entry.endpoint, entry.requestSummary?.adminKey])).to.deep.include([
      '/admin/api/clients',
      { id: null, name: 'operators:alice', role: 'admin', session: true },
    ]);

    // Signing out ends the session on the server, not only in the browser.
    // A form another site posts cannot sign the operator out: the console's header is needed here too.
    const forgedOut = await fetch(`${server.url}/admin/sign-out`, { method: 'POST', headers: { cookie } });
    expect(forgedOut.status).to.equal(403);
    expect((await fetch(`${server.url}/admin/api/api-keys/current`, { headers: { cookie } })).status).to.equal(200);
    const out = await fetch(`${server.url}/admin/sign-out`, {
      method: 'POST',
      headers: { cookie, 'x-arbiter-console': '1' },
    });
    expect(out.status).to.equal(204);
    expect((await fetch(`${server.url}/admin/api/api-keys/current`, { headers: { cookie } })).status).to.equal(401);

    // Found 2026-11-29: neither the sign-in nor the sign-out was in the audit log.
    for (const endpoint of ['/admin/sign-in/callback', '/admin/sign-out']) {
      const audited = (await server.admin('GET', `/audit-logs?endpoint=${encodeURIComponent(endpoint)}&size=20`)).body
        .content as any[];
      expect(
        audited.map((entry) => entry.requestSummary?.adminKey?.name),
        endpoint,
      ).to.include('operators:alice');
    }
  });

  // Found 2026-11-30: every session cookie counted against one identity, so wrong cookies (sent
  // with any Authorization header) from 10 addresses locked every signed-in operator out.
  it('keeps signed-in operators in however many wrong session cookies come from however many addresses', async function () {
    const { agent } = await signIn('alice');
    const cookie = cookieOf(agent);
    for (let address = 0; address < IDENTITY_WIDE_FACTOR + 1; address++)
      for (let attempt = 0; attempt <= FAILURE_LIMIT; attempt++) {
        const junk = await rawRequest(server.url, {
          path: '/admin/api/clients',
          localAddress: `127.0.3.${address + 1}`,
          headers: { Cookie: `arbiter_admin_session=junk-${address}-${attempt}`, Authorization: 'x' },
        });
        expect(junk.status).to.be.oneOf([401, 429]);
      }
    const current = await rawRequest(server.url, {
      path: '/admin/api/api-keys/current',
      localAddress: '127.0.3.100',
      headers: { Cookie: cookie },
    });
    expect(current.status, current.text).to.equal(200);
  });

  // Found 2026-11-30: a session outlived the identity provider's disabling (and the operator's
  // removal from the grants, and console sign-in being turned off) until its own end, up to 7 days.
  it("ends an operator's session while the identity provider they signed in at is disabled", async function () {
    const { agent } = await signIn('alice');
    const cookie = cookieOf(agent);
    const current = () => fetch(`${server.url}/admin/api/api-keys/current`, { headers: { cookie } });
    expect((await current()).status).to.equal(200);
    const setEnabled = async (enabled: boolean) => {
      const changed = await server.admin('PUT', '/identity-providers/operators', {
        idpId: 'operators',
        issuer: `http://localhost:${idpPort}`,
        clientId: DEV_IDP_CLIENT.clientId,
        enabled,
      });
      expect(changed.status, JSON.stringify(changed.body)).to.equal(200);
    };
    await setEnabled(false);
    try {
      expect((await current()).status, 'the provider disabled').to.equal(401);
    } finally {
      await setEnabled(true);
    }
  });

  it('takes the role the grants give an operator when the session is used, not when it was opened', async function () {
    const grants = { alice: { role: 'admin' }, bob: { role: 'read-only' } };
    const port = await freePort();
    const issuer = `http://127.0.0.1:${port}`;
    const idpPort = await freePort();
    const ownIdp = await startDevIdp({ port: idpPort, redirectUris: [`${issuer}/admin/sign-in/callback`] });
    const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-session-grants-'));
    const settings = {
      PORT: String(port),
      ISSUER: issuer,
      STORE_URL: `sqlite:${join(dataDir, 'arbiter.db')}`,
      ADMIN_SIGN_IN_IDP: 'operators',
      ADMIN_SIGN_IN_CLAIM: 'preferred_username',
      ADMIN_SIGN_IN_GRANTS: JSON.stringify(grants),
    };
    let first: TestServer | undefined = await readyServer(settings);
    try {
      await registerIdentityProvider(first, `http://localhost:${idpPort}`, { idpId: 'operators' });
      const agent = new FetchUserAgent();
      const atOwnConsole = (url: URL) => url.host === new URL(issuer).host && url.pathname === '/admin';
      const loginPage = await agent.navigate(`${issuer}/admin/sign-in`, atOwnConsole);
      await passDevIdpForms(agent, loginPage, 'bob', atOwnConsole);
      const cookie = (agent as unknown as { cookieHeader(url: URL): string }).cookieHeader(
        new URL(`${issuer}/admin/api`),
      );
      const current = async (target: TestServer) =>
        await (await fetch(`${target.url}/admin/api/api-keys/current`, { headers: { cookie } })).json();
      expect(await current(first)).to.include({ role: 'read-only', name: 'operators:bob' });
      // The same store, restarted with grants that give bob nothing: his session ends.
      await first.close();
      first = undefined;
      const restarted = await readyServer({
        ...settings,
        ADMIN_SIGN_IN_GRANTS: JSON.stringify({ alice: grants.alice }),
      });
      try {
        const refused = await fetch(`${restarted.url}/admin/api/api-keys/current`, { headers: { cookie } });
        expect(refused.status).to.equal(401);
      } finally {
        await restarted.close();
      }
    } finally {
      await first?.close();
      await ownIdp.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('confines an operator to the tenants the mapping gives, and refuses one it gives nothing', async function () {
    const { agent } = await signIn('bob');
    const cookie = cookieOf(agent);
    const inAcme = await fetch(`${server.url}/admin/api/clients`, { headers: { cookie, 'x-tenant-id': 'acme' } });
    expect(inAcme.status).to.equal(200);
    const elsewhere = await fetch(`${server.url}/admin/api/clients`, { headers: { cookie } });
    expect(elsewhere.status).to.equal(403);

    const stranger = new FetchUserAgent();
    const loginPage = await stranger.navigate(`${server.url}/admin/sign-in`, atConsole);
    const refused = await passDevIdpForms(stranger, loginPage, 'mallory', atConsole);
    expect(refused.status).to.equal(403);
    expect(refused.body).to.contain('gives them no role');
    expect(cookieOf(stranger)).to.equal('');
    const audited = (
      await server.admin('GET', `/audit-logs?endpoint=${encodeURIComponent('/admin/sign-in/callback')}&size=50`)
    ).body.content as any[];
    expect(
      audited.find((entry) => entry.requestSummary?.result?.operator === 'operators:mallory'),
      'the refused sign-in, naming who',
    ).to.include({ outcome: 'deny' });
  });

  // Found 2026-11-29: a sign-in whose audit entry could not be stored was answered 503, with a session that worked.
  it('opens no session when the audit log cannot record the sign-in', async function () {
    const agent = new FetchUserAgent();
    const loginPage = await agent.navigate(`${server.url}/admin/sign-in`, atConsole);
    const db = new Database(server.config.storeUrl.slice('sqlite:'.length));
    try {
      db.pragma('busy_timeout = 5000');
      db.exec(`CREATE TRIGGER refuse_audit BEFORE INSERT ON c_audit_logs BEGIN SELECT RAISE(ABORT, 'refused'); END`);
      const back = await passDevIdpForms(agent, loginPage, 'alice', atConsole);
      expect(back.status, back.body).to.equal(503);
    } finally {
      db.exec('DROP TRIGGER IF EXISTS refuse_audit');
      db.close();
    }
    expect(cookieOf(agent), 'no cookie').to.equal('');
    const sessions = await server.store.collection(ADMIN_SESSIONS_COLLECTION, DEFAULT_TENANT).count();
    const signedIn = await signIn('alice');
    expect(signedIn.back.url.pathname, 'a sign-in once the log takes entries').to.equal('/admin');
    expect(await server.store.collection(ADMIN_SESSIONS_COLLECTION, DEFAULT_TENANT).count()).to.equal(sessions + 1);
  });

  it("refuses an attacker's own sign-in finished in an operator's browser (login CSRF), which keeps its session", async function () {
    const { agent: alice } = await signIn('alice');
    const aliceCookie = cookieOf(alice);
    // Bob signs himself in, and stops where the identity provider sends him back with his code.
    const bob = new FetchUserAgent();
    const atCallback = (url: URL) => url.pathname === '/admin/sign-in/callback';
    const loginPage = await bob.navigate(`${server.url}/admin/sign-in`, atCallback);
    const stopped = await passDevIdpForms(bob, loginPage, 'bob', atCallback);
    expect(stopped.url.pathname).to.equal('/admin/sign-in/callback');
    // A page of Bob's sends Alice's browser there.
    const forced = await alice.navigate(stopped.url, atConsole);
    expect(forced.status).to.equal(400);
    expect(forced.body).to.contain('begun in another browser');
    expect(cookieOf(alice), 'her session cookie is still hers').to.equal(aliceCookie);
    const current = await fetch(`${server.url}/admin/api/api-keys/current`, { headers: { cookie: cookieOf(alice) } });
    expect(await current.json()).to.include({ name: 'operators:alice' });
    // Bob's own browser still finishes his sign-in.
    const finished = await bob.navigate(stopped.url, atConsole);
    expect(finished.url.pathname).to.equal('/admin');
    // Once: the callback took his sign-in cookie.
    expect((await bob.navigate(stopped.url, atConsole)).status).to.equal(400);
  });

  it('stores nothing for a sign-in begun: anyone may load /admin/sign-in', async function () {
    const sessions = server.store.collection(ADMIN_SESSIONS_COLLECTION, DEFAULT_TENANT);
    const before = (await sessions.find({})).length;
    for (let load = 0; load < 20; load += 1) {
      const begun = await fetch(`${server.url}/admin/sign-in`, { redirect: 'manual' });
      expect(begun.status).to.equal(302);
      expect(begun.headers.get('set-cookie')).to.match(/^arbiter_admin_sign_in=/);
    }
    expect((await sessions.find({})).length).to.equal(before);
  });

  it('refuses a callback it did not start, or one replayed', async function () {
    const forged = await fetch(`${server.url}/admin/sign-in/callback?code=x&state=made-up`);
    expect(forged.status).to.equal(400);
    expect(((await forged.json()) as any).error).to.equal('invalid_request');
  });
});
