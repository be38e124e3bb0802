import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { clientRecords } from '../../src/catalog/index.js';
import { basic, clientCredentials, confidentialClient, eventually, postForm } from '../support/oauth.js';
import { inTenant, withServer, type TestServer } from '../support/server.js';

/**
 * Client secret rotation with grace (issue 37, point 6): POST /admin/api/clients/{clientId}/secret
 * answers a new secret once and keeps the previous one valid for `graceSeconds`, at /token
 * (oidc-provider's client authentication) and at the APIs that take client credentials
 * (/introspect), so that every replica of a client can change over; then only the new one works.
 * Each test has a tenant of its own on the shared server.
 */
describe('Client secret rotation with grace', function () {
  let shared: TestServer;

  before(async function () {
    shared = await withServer();
  });

  const unique = (prefix: string) => `rotation-${prefix}-${randomUUID().slice(0, 8)}`;

  /** A tenant of its own, and in it a resource server that may introspect with its client credentials. */
  async function introspectingClient(): Promise<{
    server: TestServer;
    tenant: string;
    clientId: string;
    secret: string;
  }> {
    const tenant = unique('t');
    const server = inTenant(shared, tenant);
    const clientId = unique('rs');
    const secret = await confidentialClient(server, clientId, {
      scopes: ['introspection'],
      grantedResources: [{ type: 'urn:as:introspect', scopes: [] }],
    });
    return { server, tenant, clientId, secret };
  }

  /**
   * Whether `secret` authenticates the client at /token and at /introspect (the two must agree,
   * but for a grace that ends between them: /token, asked first, accepted it, /introspect not).
   */
  async function accepted(server: TestServer, clientId: string, secret: string, graceEnd = Infinity): Promise<boolean> {
    const token = await clientCredentials(server, clientId, secret, { scope: 'introspection' });
    const introspected = await postForm(
      server,
      '/introspect',
      { token: 'x' },
      { Authorization: basic(clientId, secret) },
    );
    const graceEndedBetween = token.status === 200 && introspected.status === 401 && Date.now() >= graceEnd;
    expect([200, 401], JSON.stringify(token.body)).to.include(token.status);
    if (!graceEndedBetween)
      expect(introspected.status === 200, `/token said ${token.status}, /introspect ${introspected.status}`).to.equal(
        token.status === 200,
      );
    if (token.status === 401) expect(token.body.error).to.equal('invalid_client');
    return token.status === 200;
  }

  const rotate = (server: TestServer, clientId: string, body?: unknown) =>
    server.admin('POST', `/clients/${encodeURIComponent(clientId)}/secret`, body);

  it('keeps the previous secret valid for graceSeconds beside the new one, then only the new one', async function () {
    const { server, clientId, secret: old } = await introspectingClient();
    const before = Date.now();
    // Long enough that a loaded machine still uses the previous secret within it.
    const rotated = await rotate(server, clientId, { graceSeconds: 6 });
    expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
    const { generatedClientSecret: fresh, previousSecretValidUntil } = rotated.body;
    expect(fresh).to.match(/^[A-Za-z0-9]{43}$/);
    const until = Date.parse(previousSecretValidUntil);
    expect(until - before).to.be.within(6_000, 6_000 + 5_000);

    expect(await accepted(server, clientId, old), 'the previous secret, in its grace').to.equal(true);
    expect(await accepted(server, clientId, fresh), 'the new secret').to.equal(true);
    // Asked until it is refused: it is accepted up to the end of the grace and refused from then on.
    await eventually(async () => !(await accepted(server, clientId, old, until)), 20_000, 300);
    const refusedAt = Date.now();
    expect(refusedAt, 'not refused before the grace ends').to.be.at.least(until);
    expect(refusedAt - until, 'refused soon after the grace ends').to.be.below(5_000);
    expect(await accepted(server, clientId, fresh), 'the new secret, after the grace').to.equal(true);

    // Audited: the rotation (never a secret), and which secret each request used while a grace was in force.
    await eventually(async () => {
      const entries = await server.admin(
        'GET',
        `/audit-logs?endpoint=${encodeURIComponent(`/admin/api/clients/${clientId}/secret`)}`,
      );
      return entries.body.content?.length === 1;
    });
    const [entry] = (
      await server.admin('GET', `/audit-logs?endpoint=${encodeURIComponent(`/admin/api/clients/${clientId}/secret`)}`)
    ).body.content;
    expect(entry).to.include({ method: 'POST', clientId, outcome: 'allow' });
    expect(entry.requestSummary.result).to.deep.equal({
      secret: 'rotated',
      graceSeconds: '6',
      previousSecretValidUntil,
    });
    expect(JSON.stringify(entry)).not.to.contain(fresh).and.not.to.contain(old);
    const used = async () =>
      (await server.admin('GET', `/audit-logs?endpoint=%2Ftoken&clientId=${encodeURIComponent(clientId)}&size=100`))
        .body.content as { requestSummary: { status: number; result?: { clientSecret?: string } } }[];
    await eventually(async () =>
      (await used()).some((token) => token.requestSummary.result?.clientSecret === 'previous'),
    );
    const secretsUsed = (await used()).map((token) => token.requestSummary.result?.clientSecret);
    expect(secretsUsed).to.include('current').and.to.include('previous');
  });

  it('rotates at once with graceSeconds 0 or no body, and a second rotation ends the grace of the first', async function () {
    const { server, tenant, clientId, secret: first } = await introspectingClient();
    const second = (await rotate(server, clientId, { graceSeconds: 600 })).body.generatedClientSecret as string;
    expect(await accepted(server, clientId, first)).to.equal(true);
    const third = await rotate(server, clientId, { graceSeconds: 600 });
    expect(third.status).to.equal(200);
    expect(await accepted(server, clientId, first), 'the grace secret of the first rotation').to.equal(false);
    expect(await accepted(server, clientId, second), 'the grace secret of the second').to.equal(true);
    expect(await accepted(server, clientId, third.body.generatedClientSecret)).to.equal(true);

    // Kept only as a digest or a hash, and never shown; a GET's answer PUT back keeps the grace.
    const stored = (await clientRecords(shared.store, tenant).findOne({ clientId }))!;
    expect(stored.secretGrace?.previous).to.match(/^(hmac-sha256:|\$2[aby]\$)/);
    expect(JSON.stringify(stored)).not.to.contain(second);
    const shown = (await server.admin('GET', `/clients/${clientId}`)).body;
    expect(shown).not.to.have.property('secretGrace');
    expect((await server.admin('PUT', `/clients/${clientId}`, shown)).status).to.equal(200);
    expect(await accepted(server, clientId, second), 'still in its grace after an unrelated edit').to.equal(true);

    const atOnce = await rotate(server, clientId, { graceSeconds: 0 });
    expect(atOnce.body.previousSecretValidUntil).to.equal(null);
    expect(await accepted(server, clientId, third.body.generatedClientSecret)).to.equal(false);
    expect(await accepted(server, clientId, second)).to.equal(false);
    const noBody = await server.request(`/admin/api/clients/${clientId}/secret`, { method: 'POST', admin: true });
    expect(noBody.status).to.equal(200);
    const last = ((await noBody.json()) as { generatedClientSecret: string }).generatedClientSecret;
    expect(await accepted(server, clientId, atOnce.body.generatedClientSecret)).to.equal(false);
    expect(await accepted(server, clientId, last)).to.equal(true);
  });

  it('ends the grace when an operator sets another secret', async function () {
    const { server, clientId, secret: old } = await introspectingClient();
    expect((await rotate(server, clientId, { graceSeconds: 600 })).status).to.equal(200);
    expect(await accepted(server, clientId, old), 'in its grace').to.equal(true);
    const shown = (await server.admin('GET', `/clients/${clientId}`)).body;
    const typed = await server.admin('PUT', `/clients/${clientId}`, { ...shown, clientSecret: 'typed-by-an-operator' });
    expect(typed.status, JSON.stringify(typed.body)).to.equal(200);
    expect(await accepted(server, clientId, old)).to.equal(false);
    expect(await accepted(server, clientId, 'typed-by-an-operator')).to.equal(true);
  });

  it('refuses bad grace values, public clients and unknown clients with a clear 4xx', async function () {
    const { server, clientId, secret } = await introspectingClient();
    for (const body of [
      { graceSeconds: -1 },
      { graceSeconds: 1.5 },
      { graceSeconds: '60' },
      { graceSeconds: null },
      { graceSeconds: 30 * 24 * 3600 + 1 },
      { grace: 60 },
      [],
    ]) {
      const answer = await rotate(server, clientId, body);
      expect(answer.status, JSON.stringify(body)).to.equal(400);
      expect(answer.body.error).to.equal('invalid_request');
    }
    expect(await accepted(server, clientId, secret), 'nothing was rotated').to.equal(true);
    expect((await rotate(server, clientId, { graceSeconds: 30 * 24 * 3600 })).status, 'the longest grace').to.equal(
      200,
    );

    const publicId = unique('spa');
    expect((await server.admin('POST', '/clients', { clientId: publicId, clientType: 'public' })).status).to.equal(201);
    const refused = await rotate(server, publicId, {});
    expect(refused.status).to.equal(400);
    expect(refused.body.error).to.equal('invalid_request');
    const unknown = await rotate(server, unique('nobody'), {});
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.equal('not_found');
  });
});
