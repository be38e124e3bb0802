import { expect } from 'chai';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { withServer, type TestServer } from '../support/server.js';

const TENANT = 'unbound-subjects';

/**
 * Found 2026-11-29: a subject an operator made without an identity provider was bound to the
 * first provider that signed in a user with its subjectId, and any user picks the provider
 * (upstream_idp): whoever was that sub at another provider of the tenant took the subject (its
 * delegations, resources, roles) and locked its person out. With several providers, it waits
 * for an operator to name its provider.
 */
describe("a subject made without an identity provider is no provider's to take when the tenant has several", function () {
  let server: TestServer;
  let corporate: RegisteredDevIdp;
  let other: RegisteredDevIdp;
  let rp: TestClient;

  before(async function () {
    server = await withServer();
    corporate = await startRegisteredDevIdp(server, { tenantId: TENANT, tenantPath: true, idpId: 'corporate' });
    other = await startRegisteredDevIdp(server, { tenantId: TENANT, tenantPath: true, idpId: 'other' });
    rp = await registerPublicClient(server, 'http://127.0.0.1:1/unbound-subjects/cb', {
      clientId: 'unbound-subjects-rp',
      tenantId: TENANT,
    });
  });
  after(async function () {
    await corporate?.close();
    await other?.close();
  });

  /** A browser sign-in of `login` at the provider `idpId` of the tenant: the error the client got, or null for a code. */
  async function signInAt(idpId: string, login: string): Promise<string | null> {
    const request = await authorizationRequest(server, rp, { upstream_idp: idpId });
    const url = request.url.replace(
      `${server.config.issuer}/authorize`,
      `${server.config.issuer}/t/${TENANT}/authorize`,
    );
    const agent = new FetchUserAgent();
    const page = await agent.navigate(url, arrivingAt(rp.redirectUri));
    const landed = await passDevIdpForms(agent, page, login, arrivingAt(rp.redirectUri));
    const code = landed.url.searchParams.get('code');
    return code ? null : (landed.url.searchParams.get('error') ?? `no answer: ${landed.url.href}`);
  }

  it('refuses it at every provider until an operator names one, which then signs it in alone', async function () {
    const created = await server.admin('POST', '/subjects', { subjectId: 'carol', tenantId: TENANT });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(await signInAt('other', 'carol'), 'another provider').to.equal('access_denied');
    expect(await signInAt('corporate', 'carol'), 'nor the one meant, before an operator says so').to.equal(
      'access_denied',
    );
    const record = await server.admin('GET', `/subjects/${created.body.id}?tenantId=${TENANT}`);
    expect(record.body.identityProviderId ?? null, 'still unbound').to.equal(null);

    const named = await server.admin('PUT', `/subjects/${created.body.id}?tenantId=${TENANT}`, {
      subjectId: 'carol',
      tenantId: TENANT,
      identityProviderId: corporate.id,
    });
    expect(named.status, JSON.stringify(named.body)).to.equal(200);
    expect(await signInAt('corporate', 'carol'), 'its provider').to.equal(null);
    expect(await signInAt('other', 'carol'), 'another provider').to.equal('access_denied');
  });

  it('signs in users it has no subject for at any provider, each bound to the one that signed it in', async function () {
    expect(await signInAt('other', 'dave')).to.equal(null);
    expect(await signInAt('corporate', 'dave'), "the sub of another provider's user").to.equal('access_denied');
  });
});
