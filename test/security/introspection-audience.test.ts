import { expect } from 'chai';
import { createOidcAdapter } from '../../adapters/oidc/index.js';
import { basic, clientToken, confidentialClient, postForm, updateOauthData } from '../support/oauth.js';
import { inTenant, readyServer, withServer, type TestServer } from '../support/server.js';

const TENANT = 'introspection-audience';
const A = 'https://a.example/';
const B = 'https://b.example/';
const C = 'https://c.example/';
const D = 'https://d.example/';

/** A client's two ways to call /introspect: Basic with its secret, and Bearer with its own `introspection` token. */
interface Introspector {
  basic: string;
  bearer: string;
}

/**
 * Issue 33, item 9: RFC 7662 §4 — a resource server must not learn about tokens that were not
 * issued for it. Before, a client_credentials token for resource A was `active: true`, with its
 * scope, client and `aud`, when the resource server of B introspected it. The default pack now
 * answers a caller that is a registered resource server `{"active": false}` for a token whose
 * audiences do not include one of its resource indicators.
 */
describe('introspection answers a resource server only about tokens issued for it', function () {
  let server: TestServer;
  let appSecret: string;
  const callers: Record<string, Introspector> = {};

  before(async function () {
    // A tenant of its own on the shared server: its resource servers, clients and tokens are apart from other files'.
    server = inTenant(await withServer(), TENANT);
    appSecret = await confidentialClient(server, 'app', { scopes: ['read'] });
    // rs-a introspects for A, rs-b for B, rs-cd for both C and D (one client in front of two APIs).
    for (const [clientId, indicators] of [
      ['rs-a', [A]],
      ['rs-b', [B]],
      ['rs-cd', [C, D]],
    ] as const) {
      await registerResourceServers(clientId, indicators);
    }
    // An introspector entitled by urn:as:introspect that is no resource server (a gateway, say).
    await introspector(
      'gateway',
      { grantedResources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }] },
      { resource: 'urn:as:introspect' },
    );
  });

  async function introspector(
    clientId: string,
    fields: Record<string, unknown>,
    tokenForm: Record<string, string> = {},
  ): Promise<void> {
    const secret = await confidentialClient(server, clientId, fields);
    const bearer = await clientToken(server, clientId, secret, { scope: 'introspection', ...tokenForm });
    callers[clientId] = { basic: basic(clientId, secret), bearer: `Bearer ${bearer}` };
  }

  async function registerResourceServers(clientId: string, indicators: readonly string[]): Promise<void> {
    await introspector(clientId, { scopes: ['introspection'] });
    const { id } = (await server.admin('GET', `/clients/${clientId}`)).body;
    for (const resourceIndicator of indicators) {
      const created = await server.admin('POST', '/resource-servers', { resourceIndicator, clientId: id });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
  }

  async function tokenFor(resource?: string): Promise<string> {
    return clientToken(server, 'app', appSecret, { scope: 'read', ...(resource ? { resource } : {}) });
  }

  /** The answers of `clientId`'s two ways of calling, Basic first. */
  async function introspectedBy(clientId: string, token: string): Promise<Record<string, unknown>[]> {
    const answers = [];
    for (const auth of [callers[clientId]!.basic, callers[clientId]!.bearer]) {
      const answer = await postForm(server, '/introspect', { token }, { Authorization: auth });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      answers.push(answer.body as Record<string, unknown>);
    }
    return answers;
  }

  it("answers the resource server of B exactly {active: false} for A's token, and A the token", async function () {
    const token = await tokenFor(A);
    for (const answer of await introspectedBy('rs-b', token)) expect(answer).to.deep.equal({ active: false });
    for (const answer of await introspectedBy('rs-a', token))
      expect(answer).to.include({ active: true, aud: A, scope: 'read', client_id: 'app' });
  });

  it('answers each resource server of a client that introspects for several', async function () {
    for (const answer of await introspectedBy('rs-cd', await tokenFor(D)))
      expect(answer).to.include({ active: true, aud: D });
    for (const answer of await introspectedBy('rs-cd', await tokenFor(A)))
      expect(answer).to.deep.equal({ active: false });
  });

  it('answers every resource server among the audiences of a token with two, and no other', async function () {
    // Arbiter issues one audience per token (README, RFC 8707): this token's second one is written
    // into the store, as an older release or another issuer sharing the store might leave it.
    const token = await tokenFor(A);
    const artefacts = new (createOidcAdapter(server.store, TENANT))('ClientCredentials');
    const payload = await artefacts.find(token);
    expect(payload?.aud).to.equal(A);
    await artefacts.upsert(token, { ...payload, aud: [A, C] }, 600);

    for (const clientId of ['rs-a', 'rs-cd'])
      for (const answer of await introspectedBy(clientId, token))
        expect(answer, clientId).to.deep.include({ active: true, aud: [A, C] });
    for (const answer of await introspectedBy('rs-b', token)) expect(answer).to.deep.equal({ active: false });
  });

  it('answers every resource server about a token issued for no resource (it is meant for none in particular)', async function () {
    const token = await tokenFor();
    for (const clientId of ['rs-a', 'rs-b'])
      for (const answer of await introspectedBy(clientId, token)) expect(answer, clientId).to.include({ active: true });
  });

  it('answers an entitled introspector that is no resource server about every token, as before', async function () {
    for (const resource of [A, B])
      for (const answer of await introspectedBy('gateway', await tokenFor(resource)))
        expect(answer).to.include({ active: true, aud: resource });
  });

  it('records why the answer was inactive in the audit entry, without the token', async function () {
    const token = await tokenFor(A);
    await postForm(server, '/introspect', { token }, { Authorization: callers['rs-b']!.basic });
    const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/introspect&size=1&sort=id,desc')).body.content;
    expect(entry.policyInput.token.audiences).to.deep.equal([A]);
    expect(entry.policyInput.caller.resource_indicators).to.deep.equal([B]);
    expect(entry.policyDecision).to.include({ allow: false, error: 'access_denied' });
    expect(JSON.stringify(entry)).not.to.contain(token);
  });
});

/**
 * The same hole let a resource server spend another's single-use token: a token the policy marks
 * jit_single_use is deleted after its first successful introspection, and B's counted as one.
 */
describe('introspection by another resource server does not spend a single-use token', function () {
  const TICKETS = 'urn:example:audience-tickets';
  let server: TestServer;
  let appSecret: string;
  const auth: Record<string, string> = {};

  before(async function () {
    // Its own server: the test adds a resource type to the shared policy data.
    server = await readyServer();
    appSecret = await confidentialClient(server, 'app', { scopes: ['read'] });
    for (const [clientId, resourceIndicator] of [
      ['rs-a', A],
      ['rs-b', B],
    ]) {
      auth[clientId!] = basic(clientId!, await confidentialClient(server, clientId!));
      const { id } = (await server.admin('GET', `/clients/${clientId}`)).body;
      const created = await server.admin('POST', '/resource-servers', {
        resourceIndicator,
        clientId: id,
        typeUris: [TICKETS],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
    await updateOauthData(server, (data) => {
      data.resource_types[TICKETS] = { scopes: ['read'], jit_single_use: true };
    });
  });

  after(async function () {
    await server?.close();
  });

  it("leaves A's single-use token to A: B is told nothing, A's first introspection is the one that counts", async function () {
    const token = await clientToken(server, 'app', appSecret, { scope: 'read', resource: A });
    const introspect = async (clientId: string) =>
      (await postForm(server, '/introspect', { token }, { Authorization: auth[clientId]! })).body;
    expect(await introspect('rs-b')).to.deep.equal({ active: false });
    expect(await introspect('rs-a')).to.include({ active: true, aud: A });
    expect(await introspect('rs-a')).to.deep.equal({ active: false });
  });
});
