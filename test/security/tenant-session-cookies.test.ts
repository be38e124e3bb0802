import { expect } from 'chai';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  passDevIdpForms,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { withServer, type TestServer } from '../support/server.js';
import { tenantCookieNames } from '../../src/oauth/configuration.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

const ACME = 'session-cookies-acme';
const REDIRECT_URI = 'http://127.0.0.1:1/session-cookies/cb';

/**
 * A cookie at `/` goes with every request below it, /t/<tenant>/… included. Found 2026-11-29: all
 * providers named their session cookie `_session`, and a provider that could not check another's
 * signature deleted it, so one visit to /t/<tenant>/authorize (a link an attacker sends will do)
 * signed the browser out of the default tenant; the tenants named by X-Tenant-Id, all at `/`,
 * overwrote each other's.
 */
describe("each tenant's provider keeps its own cookies", function () {
  let server: TestServer;
  const idps: RegisteredDevIdp[] = [];

  before(async function () {
    server = await withServer();
    idps.push(await startRegisteredDevIdp(server, { idpId: 'session-cookies-default-idp' }));
    idps.push(
      await startRegisteredDevIdp(server, { tenantId: ACME, tenantPath: true, idpId: 'session-cookies-acme-idp' }),
    );
    for (const tenantId of [undefined, ACME])
      await registerPublicClient(server, REDIRECT_URI, {
        clientId: 'session-cookies-rp',
        ...(tenantId ? { tenantId } : {}),
      });
  });
  after(async function () {
    for (const idp of idps) await idp.close();
  });

  async function authorize(agent: FetchUserAgent, base: string, extra: Record<string, string> = {}): Promise<URL> {
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: 'session-cookies-rp',
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      state: 'st',
      code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      // The shared server's default tenant has other files' providers too: this file's, by name.
      upstream_idp: base.includes('/t/') ? 'session-cookies-acme-idp' : 'session-cookies-default-idp',
      ...extra,
    });
    const page = await agent.navigate(`${base}/authorize?${query}`, arrivingAt(REDIRECT_URI));
    if (page.status === undefined) return page.url;
    return (await passDevIdpForms(agent, page, 'session-cookies-alice', arrivingAt(REDIRECT_URI))).url;
  }

  it("names them after the tenant and how it is reached, but the default tenant's", function () {
    const sessions = [
      tenantCookieNames(DEFAULT_TENANT, '').names?.session ?? '_session',
      tenantCookieNames('acme', '').names!.session,
      tenantCookieNames('acme', '/t/acme').names!.session,
      tenantCookieNames('beta', '').names!.session,
    ];
    expect(sessions).to.deep.equal(['_session', '_session~acme', '_session~t~acme', '_session~beta']);
  });

  it("gives no tenant a cookie that is another's signature cookie (<name>.sig): found 2026-11-30, tenant 'acme.sig' had one", function () {
    const every = (tenant: string) =>
      ['', `/t/${tenant}`].flatMap((basePath) => Object.values(tenantCookieNames(tenant, basePath).names ?? {}));
    const tenants = ['acme', 'acme.sig', 'acme.sig.sig', 'a.b'];
    const names = tenants.flatMap(every);
    const signatures = names.map((name) => `${name}.sig`);
    expect(names.filter((name) => signatures.includes(name))).to.deep.equal([]);
    expect(new Set(names).size, 'each name once').to.equal(names.length);
  });

  it('a default-tenant session survives a visit to /t/<tenant>/authorize', async function () {
    const agent = new FetchUserAgent();
    const root = server.config.issuer;
    expect((await authorize(agent, root)).searchParams.get('code'), 'signed in at the default tenant').to.be.a(
      'string',
    );
    const silentBefore = await authorize(agent, root, { prompt: 'none' });
    expect(silentBefore.searchParams.get('code'), `control: ${silentBefore.href}`).to.be.a('string');
    expect(agent.cookie(`${root}/authorize`, '_session.sig'), 'default session signature before').to.be.a('string');
    // Only a prompt=none visit at another tenant: nothing is signed in there.
    const atAcme = await authorize(agent, `${root}/t/${ACME}`, { prompt: 'none' });
    expect(atAcme.searchParams.get('error')).to.equal('login_required');
    expect(agent.cookie(`${root}/authorize`, '_session.sig'), 'default session signature after').to.be.a('string');
    const silentAfter = await authorize(agent, root, { prompt: 'none' });
    expect(silentAfter.searchParams.get('error'), silentAfter.href).to.equal(null);
    expect(silentAfter.searchParams.get('code'), 'still signed in at the default tenant').to.be.a('string');
  });
});
