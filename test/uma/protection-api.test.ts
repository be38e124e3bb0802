import { expect } from 'chai';
import { startRegisteredDevIdp, type RegisteredDevIdp } from '../support/dev-idp.js';
import { DpopKey } from '../support/dpop.js';
import { basic, clientToken, confidentialClient, eventually, postForm } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { api, PHOTO_TYPE, UMA_GRANT, umaPublicClient, userToken } from './support.js';

const RESOURCES = '/resource_registration/resource';
const PAT = { resource: 'urn:as:introspect', scope: 'uma_protection' };

/** Spec: UMA (resource registration, permission tickets) and Authentication rule 3 (protection tokens). */
describe('UMA protection API: resource registration and permission tickets', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let rsPat: string;
  let otherPat: string;
  let alicePat: string;
  let rsSecret: string;

  before(async function () {
    server = await readyServer({ TENANTS: 'acme' });
    idp = await startRegisteredDevIdp(server);
    rsSecret = await confidentialClient(server, 'photos-rs', { scopes: ['uma_protection', 'introspection'] });
    const otherSecret = await confidentialClient(server, 'other-rs', { scopes: ['uma_protection'] });
    rsPat = await clientToken(server, 'photos-rs', rsSecret, PAT);
    otherPat = await clientToken(server, 'other-rs', otherSecret, PAT);
    const app = await umaPublicClient(server, 'photos-app', 'http://127.0.0.1:1/photos/cb');
    alicePat = await userToken(server, app, 'alice', { ...PAT, scope: 'openid uma_protection' });
    const type = await server.admin('POST', '/resource-types', {
      typeUri: PHOTO_TYPE,
      scopes: ['view', 'print', 'delete'],
    });
    expect(type.status).to.equal(201);
  });

  after(async function () {
    await idp?.close();
    await server?.close();
  });

  const register = (token: string, description: unknown) => api(server, 'POST', RESOURCES, token, description);

  describe('protection tokens', function () {
    it('refuses a call without a token, or with an unknown one: 401 invalid_token with the Bearer challenge', async function () {
      for (const token of [null, 'not-a-token']) {
        const answer = await api(server, 'GET', RESOURCES, token);
        expect(answer.status).to.equal(401);
        expect(answer.body.error).to.equal('invalid_token');
        expect(answer.headers.get('www-authenticate')).to.match(/^Bearer error="invalid_token"/);
      }
    });

    it('refuses a token without uma_protection, or not issued for urn:as:introspect: 403 insufficient_scope', async function () {
      const secret = await confidentialClient(server, 'introspector', { scopes: ['introspection', 'uma_protection'] });
      const withoutScope = await clientToken(server, 'introspector', secret, {
        resource: 'urn:as:introspect',
        scope: 'introspection',
      });
      const withoutAudience = await clientToken(server, 'introspector', secret, { scope: 'uma_protection' });
      for (const token of [withoutScope, withoutAudience]) {
        const answer = await api(server, 'GET', RESOURCES, token);
        expect(answer.status).to.equal(403);
        expect(answer.body.error).to.equal('insufficient_scope');
        expect(answer.headers.get('www-authenticate')).to.equal(
          'Bearer error="insufficient_scope", scope="uma_protection"',
        );
      }
    });

    it('does not accept a PAT in another tenant (each tenant knows only its own tokens)', async function () {
      const answer = await api(server, 'GET', RESOURCES, rsPat, undefined, { 'X-Tenant-Id': 'acme' });
      expect(answer.status).to.equal(401);
    });
  });

  describe('resource registration', function () {
    it('creates (201, _id, Location), reads, lists, replaces and deletes a client-owned resource', async function () {
      const created = await register(rsPat, { name: 'Holiday', type: PHOTO_TYPE, resource_scopes: ['view', 'print'] });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const id = created.body._id as string;
      expect(id).to.be.a('string');
      expect(created.headers.get('location')).to.equal(`${server.config.issuer}${RESOURCES}/${id}`);

      expect((await api(server, 'GET', `${RESOURCES}/${id}`, rsPat)).body).to.deep.equal({
        _id: id,
        name: 'Holiday',
        type: PHOTO_TYPE,
        resource_scopes: ['view', 'print'],
      });
      expect((await api(server, 'GET', RESOURCES, rsPat)).body).to.include(id);

      const replaced = await api(server, 'PUT', `${RESOURCES}/${id}`, rsPat, {
        name: 'Holiday 2026',
        type: PHOTO_TYPE,
        resource_scopes: ['view'],
      });
      expect(replaced.status).to.equal(200);
      expect(replaced.body).to.deep.equal({ _id: id });
      expect((await api(server, 'GET', `${RESOURCES}/${id}`, rsPat)).body).to.deep.include({
        name: 'Holiday 2026',
        resource_scopes: ['view'],
      });

      expect((await api(server, 'DELETE', `${RESOURCES}/${id}`, rsPat)).status).to.equal(204);
      expect((await api(server, 'GET', `${RESOURCES}/${id}`, rsPat)).status).to.equal(404);
      expect((await api(server, 'DELETE', `${RESOURCES}/${id}`, rsPat)).status).to.equal(404);
      expect((await api(server, 'GET', RESOURCES, rsPat)).body).not.to.include(id);
    });

    it("never reveals another owner's resource: 404 for get, put and delete, absent from the list", async function () {
      const id = (await register(rsPat, { name: 'Private', resource_scopes: ['view'] })).body._id;
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', { name: 'Mine now' }],
        ['DELETE', undefined],
      ] as const) {
        const answer = await api(server, method, `${RESOURCES}/${id}`, otherPat, body);
        expect(answer.status, method).to.equal(404);
        expect(answer.body.error).to.equal('not_found');
      }
      expect((await api(server, 'GET', RESOURCES, otherPat)).body).not.to.include(id);
      // A user PAT of the same resource server is another owner too.
      expect((await api(server, 'GET', `${RESOURCES}/${id}`, alicePat)).status).to.equal(404);
      expect((await api(server, 'GET', `${RESOURCES}/${id}`, rsPat)).body.name).to.equal('Private');
    });

    it("makes a user PAT's resources the user's: listed for her PAT only", async function () {
      const id = (await register(alicePat, { name: "Alice's album", type: PHOTO_TYPE, resource_scopes: ['view'] })).body
        ._id;
      expect((await api(server, 'GET', RESOURCES, alicePat)).body).to.deep.equal([id]);
      expect((await api(server, 'GET', RESOURCES, rsPat)).body).not.to.include(id);
    });

    it('requires resource_scopes (UMA Federated Authorization §3.1): 400 invalid_request naming it, at POST and PUT, and stores nothing', async function () {
      const before = (await api(server, 'GET', RESOURCES, rsPat)).body as string[];
      for (const body of [{}, { name: 'Unscoped' }, { name: 'Typed', type: PHOTO_TYPE }, { resource_scopes: null }]) {
        const answer = await register(rsPat, body);
        expect(answer.status, JSON.stringify(body)).to.equal(400);
        expect(answer.body).to.include({ error: 'invalid_request', field: 'resource_scopes' });
        expect(answer.body.error_description).to.match(/resource_scopes/);
      }
      expect((await api(server, 'GET', RESOURCES, rsPat)).body).to.deep.equal(before);
      const id = (await register(rsPat, { name: 'Scoped', resource_scopes: ['view'] })).body._id;
      const replaced = await api(server, 'PUT', `${RESOURCES}/${id}`, rsPat, { name: 'Scopes dropped' });
      expect(replaced.status).to.equal(400);
      expect(replaced.body).to.include({ error: 'invalid_request', field: 'resource_scopes' });
      expect((await api(server, 'GET', `${RESOURCES}/${id}`, rsPat)).body).to.deep.include({
        name: 'Scoped',
        resource_scopes: ['view'],
      });
    });

    it("refuses scopes beyond the type's scope ceiling with invalid_scope, and stores nothing", async function () {
      const before = (await api(server, 'GET', RESOURCES, rsPat)).body.length;
      const answer = await register(rsPat, { name: 'Shared', type: PHOTO_TYPE, resource_scopes: ['view', 'share'] });
      expect(answer.status).to.equal(400);
      expect(answer.body.error).to.equal('invalid_scope');
      expect(answer.body.error_description).to.contain('share');
      expect((await api(server, 'GET', RESOURCES, rsPat)).body.length).to.equal(before);
    });

    it('refuses bad bodies with a 400 naming the field, never a 500', async function () {
      const scoped = { resource_scopes: ['view'] };
      const cases: [unknown, string][] = [
        [{ ...scoped, name: 42 }, 'name'],
        [{ resource_scopes: 'view' }, 'resource_scopes'],
        [{ resource_scopes: ['view', 'view'] }, 'resource_scopes'],
        [{ resource_scopes: ['has space'] }, 'resource_scopes.0'],
        [{ ...scoped, type: 'not a uri' }, 'type'],
        [{ ...scoped, owner: 'mallory' }, 'owner'],
        [[], ''],
        [null, ''],
      ];
      for (const [body, field] of cases) {
        const answer = await register(rsPat, body);
        expect(answer.status, JSON.stringify(body)).to.equal(400);
        expect(answer.body.error).to.equal('invalid_request');
        if (field) expect(answer.body.field, JSON.stringify(body)).to.equal(field);
      }
      const notJson = await server.request(RESOURCES, {
        method: 'POST',
        headers: { Authorization: `Bearer ${rsPat}`, 'Content-Type': 'application/json' },
        body: '{"name":',
      });
      expect(notJson.status).to.equal(400);
      const wrongType = await server.request(RESOURCES, {
        method: 'POST',
        headers: { Authorization: `Bearer ${rsPat}`, 'Content-Type': 'text/plain' },
        body: 'name',
      });
      expect(wrongType.status).to.equal(415);
      const patch = await api(server, 'PATCH', `${RESOURCES}/x`, rsPat, {});
      expect(patch.status).to.equal(405);
      expect(patch.body.error).to.equal('unsupported_method_type');
    });
  });

  describe('permission tickets', function () {
    let photo: string;
    let album: string;

    before(async function () {
      photo = (await register(rsPat, { name: 'Beach', type: PHOTO_TYPE, resource_scopes: ['view', 'print'] })).body._id;
      album = (await register(rsPat, { name: 'Album', resource_scopes: ['view', 'edit'] })).body._id;
    });

    it("issues a ticket (201) for scopes among the resource's", async function () {
      const answer = await api(server, 'POST', '/permission', rsPat, { resource_id: photo, resource_scopes: ['view'] });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
      expect(answer.body).to.have.keys('ticket');
      expect(answer.body.ticket).to.match(/^[A-Za-z0-9_-]{43}$/);
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/permission&size=1&sort=id,desc')).body.content;
      expect(entry.outcome).to.equal('allow');
      expect(entry.policyInput.permission).to.deep.include({
        operation: 'ticket',
        resource_id: photo,
        resource_scopes: ['view'],
      });
      expect(JSON.stringify(entry)).not.to.contain(answer.body.ticket);
    });

    it('issues one ticket for several permissions (an array)', async function () {
      const answer = await api(server, 'POST', '/permission', rsPat, [
        { resource_id: photo, resource_scopes: ['view', 'print'] },
        { resource_id: album, resource_scopes: ['edit'] },
      ]);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
      expect(answer.body.ticket).to.be.a('string');
    });

    it("refuses an unknown resource, and another owner's, with invalid_resource_id (alike)", async function () {
      const unknown = await api(server, 'POST', '/permission', rsPat, {
        resource_id: 'no-such-resource',
        resource_scopes: ['view'],
      });
      const foreign = await api(server, 'POST', '/permission', otherPat, {
        resource_id: photo,
        resource_scopes: ['view'],
      });
      for (const answer of [unknown, foreign]) {
        expect(answer.status).to.equal(400);
        expect(answer.body.error).to.equal('invalid_resource_id');
      }
      expect(foreign.body.error_description).to.equal(unknown.body.error_description);
    });

    it("refuses a user's resource registered by another resource server, even with her PAT there (invalid_resource_id)", async function () {
      const album = (await register(alicePat, { name: 'Album', type: PHOTO_TYPE, resource_scopes: ['view'] })).body._id;
      const elsewhere = await umaPublicClient(server, 'albums-app', 'http://127.0.0.1:1/albums/cb');
      const alicePatElsewhere = await userToken(server, elsewhere, 'alice', { ...PAT, scope: 'openid uma_protection' });
      expect((await api(server, 'GET', `${RESOURCES}/${album}`, alicePatElsewhere)).status).to.equal(404);
      const ticket = await api(server, 'POST', '/permission', alicePatElsewhere, {
        resource_id: album,
        resource_scopes: ['view'],
      });
      expect(ticket.status, JSON.stringify(ticket.body)).to.equal(400);
      expect(ticket.body.error).to.equal('invalid_resource_id');
      expect(
        (await api(server, 'POST', '/permission', alicePat, { resource_id: album, resource_scopes: ['view'] })).status,
      ).to.equal(201);
    });

    it('refuses a scope the resource was not registered with (invalid_scope), also within an array', async function () {
      const single = await api(server, 'POST', '/permission', rsPat, {
        resource_id: photo,
        resource_scopes: ['delete'],
      });
      const inArray = await api(server, 'POST', '/permission', rsPat, [
        { resource_id: photo, resource_scopes: ['view'] },
        { resource_id: album, resource_scopes: ['print'] },
      ]);
      for (const answer of [single, inArray]) {
        expect(answer.status).to.equal(400);
        expect(answer.body.error).to.equal('invalid_scope');
      }
    });

    it('refuses malformed requests with a 400 naming the problem', async function () {
      for (const body of [
        { resource_id: photo },
        { resource_scopes: ['view'] },
        { resource_id: photo, resource_scopes: [] },
        [],
        { resource_id: 7, resource_scopes: ['view'] },
        Array.from({ length: 21 }, () => ({ resource_id: photo, resource_scopes: ['view'] })),
      ]) {
        const answer = await api(server, 'POST', '/permission', rsPat, body);
        expect(answer.status, JSON.stringify(body).slice(0, 80)).to.equal(400);
        expect(answer.body.error).to.equal('invalid_request');
      }
    });

    it("follows the README's walk-through: PAT, resource, ticket, RPT for the owning client, introspection with the PAT", async function () {
      const resource = (await register(rsPat, { name: 'Holiday', resource_scopes: ['view', 'print'] })).body._id;
      const { ticket } = (
        await api(server, 'POST', '/permission', rsPat, { resource_id: resource, resource_scopes: ['view'] })
      ).body;
      const rpt = await postForm(
        server,
        '/token',
        { grant_type: UMA_GRANT, ticket },
        { Authorization: basic('photos-rs', rsSecret) },
      );
      expect(rpt.status, JSON.stringify(rpt.body)).to.equal(200);
      const shown = await postForm(
        server,
        '/introspect',
        { token: rpt.body.access_token },
        { Authorization: `Bearer ${rsPat}` },
      );
      expect(shown.body).to.include({ active: true, client_id: 'photos-rs' });
      expect(shown.body.permissions).to.deep.equal([
        { resource_id: resource, resource_scopes: ['view'], exp: shown.body.exp },
      ]);
    });

    it("holds the UMA grant to a permission decision's dpop_required obligation, before the ticket is spent (found 2026-11-30)", async function () {
      const rules = (await server.admin('GET', '/policy-rules')).body as any[];
      const rule = rules.find((candidate) => candidate.path.endsWith('uma_permission/uma_permission.rego'));
      const { id, createdAt: _created, updatedAt: _updated, tenantId: _tenant, ...original } = rule;
      const owners = '} else := {"allow": true, "scopes": sort(requested & resource_scopes)} if {';
      expect(original.content).to.include(owners);
      const obliging = original.content.replace(
        owners,
        '} else := {"allow": true, "scopes": sort(requested & resource_scopes), "obligations": {"dpop_required": true}} if {',
      );
      const replaced = await server.admin('PUT', `/policy-rules/${id}`, { ...original, content: obliging });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
      try {
        const resource = (await register(rsPat, { name: 'Vault', resource_scopes: ['view'] })).body._id;
        const ticketFor = async () =>
          (await api(server, 'POST', '/permission', rsPat, { resource_id: resource, resource_scopes: ['view'] })).body
            .ticket as string;
        const redeem = async (ticket: string, headers: Record<string, string> = {}) =>
          postForm(
            server,
            '/token',
            { grant_type: UMA_GRANT, ticket },
            { Authorization: basic('photos-rs', rsSecret), ...headers },
          );
        await eventually(async () => (await redeem(await ticketFor())).body.error === 'invalid_dpop_proof');
        const ticket = await ticketFor();
        // Was: a Bearer RPT, the obligation never looked at.
        const bare = await redeem(ticket);
        expect(bare.status, JSON.stringify(bare.body)).to.equal(400);
        expect(bare.body.error).to.equal('invalid_dpop_proof');
        const key = await DpopKey.generate();
        const proven = await redeem(ticket, { DPoP: await key.proof('POST', `${server.config.issuer}/token`) });
        expect(proven.status, JSON.stringify(proven.body)).to.equal(200);
        expect(proven.body.token_type).to.equal('DPoP');
      } finally {
        await server.admin('PUT', `/policy-rules/${id}`, original);
      }
    });

    it('requires a PAT', async function () {
      expect(
        (await api(server, 'POST', '/permission', null, { resource_id: photo, resource_scopes: ['view'] })).status,
      ).to.equal(401);
    });
  });
});

describe('UMA permission tickets expire (UMA_TICKET_TTL_SECONDS)', function () {
  let server: TestServer;

  before(async function () {
    server = await readyServer({ UMA_TICKET_TTL_SECONDS: '3' });
  });

  after(async function () {
    await server?.close();
  });

  it('redeems a ticket within its lifetime, and refuses it as invalid_grant after', async function () {
    const rsSecret = await confidentialClient(server, 'rs', { scopes: ['uma_protection'] });
    const viewerSecret = await confidentialClient(server, 'viewer', { scopes: ['openid'] });
    const pat = await clientToken(server, 'rs', rsSecret, PAT);
    const resource = (await api(server, 'POST', RESOURCES, pat, { name: 'Report', resource_scopes: ['read'] })).body
      ._id;
    const { ticket } = (
      await api(server, 'POST', '/permission', pat, { resource_id: resource, resource_scopes: ['read'] })
    ).body;
    const redeem = () =>
      postForm(server, '/token', { grant_type: UMA_GRANT, ticket }, { Authorization: basic('viewer', viewerSecret) });
    // A live ticket: the policy asks who the requesting party is (need_info), which leaves the ticket usable.
    const live = await redeem();
    expect(live.body.error).to.equal('need_info');
    await eventually(async () => (await redeem()).body.error === 'invalid_grant', 15_000);
    expect((await redeem()).body.error_description).to.match(/expired/);
  });
});
