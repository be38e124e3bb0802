import { expect } from 'chai';
import { withSignInServer } from '../support/dev-idp.js';
import {
  basic,
  clientToken,
  clientWithToken,
  confidentialClient,
  eventually,
  postForm,
  updateOauthData,
} from '../support/oauth.js';
import type { TestServer } from '../support/server.js';
import { ACCESS_TOKEN_FORMAT, api, PHOTO_TYPE, UMA_GRANT, umaPublicClient, userToken } from './support.js';

const RESOURCES = '/resource_registration/resource';
const VIEWER_CALLBACK = 'http://127.0.0.1:1/viewer/cb';

/**
 * The UMA grant (UMA 2.0 Grant §3.3) decided by `uma_permission` with the requesting party, the
 * resource's owner and the active delegations; the delegation store (spec: Delegation).
 */
describe('UMA grant and the delegation store', function () {
  let server: TestServer;
  let viewerSecret: string;
  let alicePat: string;
  let aliceDelegations: string;
  let bobDelegations: string;
  let aliceClaims: string;
  let bobClaims: string;
  let carolClaims: string;
  let rsToken: string;
  let photo: string;
  let album: string;
  let photosApp: Awaited<ReturnType<typeof umaPublicClient>>;

  before(async function () {
    ({ server } = await withSignInServer());
    viewerSecret = await confidentialClient(server, 'viewer-app', {
      scopes: ['openid', 'profile'],
      redirectUris: [VIEWER_CALLBACK],
    });
    // Requesting parties sign in at the client that asks for their RPTs: a claim token is the client's own.
    const viewer = { clientId: 'viewer-app', redirectUri: VIEWER_CALLBACK, secret: viewerSecret };
    ({ token: rsToken } = await clientWithToken(server, 'photos-rs', ['introspection']));
    const app = await umaPublicClient(server, 'photos-app', 'http://127.0.0.1:1/photos/cb');
    photosApp = app;
    alicePat = await userToken(server, app, 'alice', { resource: 'urn:as:introspect', scope: 'openid uma_protection' });
    aliceDelegations = await userToken(server, app, 'alice', {
      resource: 'urn:as:delegation',
      scope: 'openid delegation_management',
    });
    bobDelegations = await userToken(server, app, 'bob', {
      resource: 'urn:as:delegation',
      scope: 'openid delegation_management',
    });
    aliceClaims = await userToken(server, viewer, 'alice', { scope: 'openid profile' });
    bobClaims = await userToken(server, viewer, 'bob', { scope: 'openid profile' });
    carolClaims = await userToken(server, viewer, 'carol', { scope: 'openid profile' });
    photo = (
      await api(server, 'POST', RESOURCES, alicePat, {
        name: 'Beach',
        type: PHOTO_TYPE,
        resource_scopes: ['view', 'print'],
      })
    ).body._id;
    album = (await api(server, 'POST', RESOURCES, alicePat, { name: 'Album', resource_scopes: ['view', 'edit'] })).body
      ._id;
  });

  const ticketFor = async (permissions: unknown): Promise<string> => {
    const answer = await api(server, 'POST', '/permission', alicePat, permissions);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.ticket;
  };
  const redeem = (form: Record<string, string>) =>
    postForm(
      server,
      '/token',
      { grant_type: UMA_GRANT, ...form },
      { Authorization: basic('viewer-app', viewerSecret) },
    );
  const asParty = (ticket: string, claimToken: string, extra: Record<string, string> = {}) =>
    redeem({ ticket, claim_token: claimToken, claim_token_format: ACCESS_TOKEN_FORMAT, ...extra });
  const introspect = (token: string) =>
    postForm(server, '/introspect', { token }, { Authorization: `Bearer ${rsToken}` });
  const delegate = (token: string, body: unknown) => api(server, 'POST', '/delegation', token, body);
  const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();

  describe('the UMA grant', function () {
    it('issues the owner an RPT whose permissions introspection shows', async function () {
      const ticket = await ticketFor({ resource_id: photo, resource_scopes: ['view', 'print'] });
      const { status, body } = await asParty(ticket, aliceClaims);
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body).to.include({ token_type: 'Bearer' });
      expect(body).not.to.have.property('refresh_token');
      const shown = await introspect(body.access_token);
      expect(shown.body).to.include({ active: true, sub: 'alice', client_id: 'viewer-app' });
      expect(shown.body.permissions).to.have.length(1);
      expect(shown.body.permissions[0]).to.deep.include({ resource_id: photo, resource_scopes: ['print', 'view'] });
      expect(shown.body.permissions[0].exp).to.equal(shown.body.exp);
      // The ticket and the claim token are bearer material: never in the audit log (nor the policy input).
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect(entry.policyInput.permission).to.deep.include({ operation: 'rpt', resource_id: photo });
      expect(entry.policyInput.subject.sub).to.equal('alice');
      expect(JSON.stringify(entry))
        .not.to.contain(ticket)
        .and.not.to.contain(aliceClaims)
        .and.not.to.contain(body.access_token);
    });

    it('redeems a ticket once (invalid_grant after), and refuses an unknown ticket', async function () {
      const ticket = await ticketFor({ resource_id: photo, resource_scopes: ['view'] });
      expect((await asParty(ticket, aliceClaims)).status).to.equal(200);
      for (const value of [ticket, 'no-such-ticket']) {
        const again = await asParty(value, aliceClaims);
        expect(again.status).to.equal(400);
        expect(again.body.error).to.equal('invalid_grant');
      }
    });

    it('answers need_info (403, the ticket, the claims to give) when no requesting party is identified', async function () {
      const ticket = await ticketFor({ resource_id: photo, resource_scopes: ['view'] });
      const { status, body } = await redeem({ ticket });
      expect(status).to.equal(403);
      expect(body.error).to.equal('need_info');
      expect(body.ticket).to.equal(ticket);
      expect(body.required_claims[0].claim_token_format).to.deep.equal([ACCESS_TOKEN_FORMAT]);
      // The ticket is still good once the party is identified.
      expect((await asParty(ticket, aliceClaims)).status).to.equal(200);
    });

    it('denies a party without rights (request_denied), allows it once the owner delegates, and no more once revoked', async function () {
      const denied = await asParty(
        await ticketFor({ resource_id: photo, resource_scopes: ['view', 'print'] }),
        bobClaims,
      );
      expect(denied.status).to.equal(403);
      expect(denied.body.error).to.equal('request_denied');

      const created = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'bob',
        resource_id: photo,
        scopes: ['view'],
        expires_at: inAnHour(),
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const allowed = await asParty(
        await ticketFor({ resource_id: photo, resource_scopes: ['view', 'print'] }),
        bobClaims,
      );
      expect(allowed.status, JSON.stringify(allowed.body)).to.equal(200);
      const shown = await introspect(allowed.body.access_token);
      expect(shown.body.sub).to.equal('bob');
      // What the owner delegated, not what the ticket asked for.
      expect(
        shown.body.permissions.map((permission: any) => [permission.resource_id, permission.resource_scopes]),
      ).to.deep.equal([[photo, ['view']]]);
      expect(shown.body.permissions[0], 'what it rests on stays on the server').not.to.have.property('delegation_ids');
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect(entry.policyInput.delegations.map((grant: any) => grant.delegation_id)).to.deep.equal([
        created.body.delegation_id,
      ]);
      // carol is not bob.
      expect(
        (await asParty(await ticketFor({ resource_id: photo, resource_scopes: ['view'] }), carolClaims)).body.error,
      ).to.equal('request_denied');

      expect(
        (await api(server, 'DELETE', `/delegation/${created.body.delegation_id}`, aliceDelegations)).status,
      ).to.equal(204);
      const revoked = await asParty(await ticketFor({ resource_id: photo, resource_scopes: ['view'] }), bobClaims);
      expect(revoked.status).to.equal(403);
      expect(revoked.body.error).to.equal('request_denied');
      // The RPT issued under the delegation ends with it, not an hour later.
      expect((await introspect(allowed.body.access_token)).body).to.deep.equal({ active: false });
    });

    it('grants a multi-permission ticket per resource, and upgrades an RPT (rpt) keeping its permissions', async function () {
      await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'carol',
        resource_id: album,
        scopes: ['view'],
        expires_at: inAnHour(),
      });
      await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'carol',
        resource_id: photo,
        scopes: ['print'],
        expires_at: inAnHour(),
      });
      const first = await asParty(
        await ticketFor([{ resource_id: album, resource_scopes: ['view', 'edit'] }]),
        carolClaims,
      );
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      const upgraded = await asParty(await ticketFor({ resource_id: photo, resource_scopes: ['print'] }), carolClaims, {
        rpt: first.body.access_token,
      });
      expect(upgraded.status, JSON.stringify(upgraded.body)).to.equal(200);
      expect(upgraded.body.upgraded).to.equal(true);
      const permissions = (await introspect(upgraded.body.access_token)).body.permissions.map((permission: any) => [
        permission.resource_id,
        permission.resource_scopes,
      ]);
      expect(permissions).to.have.deep.members([
        [photo, ['print']],
        [album, ['view']],
      ]);

      const both = await asParty(
        await ticketFor([
          { resource_id: album, resource_scopes: ['view'] },
          { resource_id: photo, resource_scopes: ['print'] },
        ]),
        carolClaims,
      );
      expect((await introspect(both.body.access_token)).body.permissions).to.have.length(2);
      // Somebody else's token is no RPT of this client to upgrade.
      const foreign = await asParty(await ticketFor({ resource_id: photo, resource_scopes: ['print'] }), carolClaims, {
        rpt: rsToken,
      });
      expect(foreign.status).to.equal(400);
      expect(foreign.body.error).to.equal('invalid_grant');
      // Nor is the owner's RPT of the same client carol's to upgrade: her token would carry alice's permissions.
      const owners = await asParty(await ticketFor({ resource_id: photo, resource_scopes: ['view'] }), aliceClaims);
      expect(owners.status, JSON.stringify(owners.body)).to.equal(200);
      const mixed = await asParty(await ticketFor({ resource_id: album, resource_scopes: ['view'] }), carolClaims, {
        rpt: owners.body.access_token,
      });
      expect(mixed.status, JSON.stringify(mixed.body)).to.equal(400);
      expect(mixed.body.error).to.equal('invalid_grant');
      expect(mixed.body.error_description).to.contain('another requesting party');
    });

    it('ends an upgraded RPT once a delegation a kept permission rests on is revoked (found 2026-11-30: it lasted)', async function () {
      // A party of its own: no delegation of another test stands in for the one revoked.
      const viewer = { clientId: 'viewer-app', redirectUri: VIEWER_CALLBACK, secret: viewerSecret };
      const erinClaims = await userToken(server, viewer, 'erin', { scope: 'openid profile' });
      const onAlbum = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'erin',
        resource_id: album,
        scopes: ['view'],
        expires_at: inAnHour(),
      });
      const onPhoto = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'erin',
        resource_id: photo,
        scopes: ['print'],
        expires_at: inAnHour(),
      });
      expect([onAlbum.status, onPhoto.status]).to.deep.equal([201, 201]);
      const first = await asParty(await ticketFor({ resource_id: album, resource_scopes: ['view'] }), erinClaims);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      const upgraded = await asParty(await ticketFor({ resource_id: photo, resource_scopes: ['print'] }), erinClaims, {
        rpt: first.body.access_token,
      });
      expect(upgraded.status, JSON.stringify(upgraded.body)).to.equal(200);
      const shown = await introspect(upgraded.body.access_token);
      expect(shown.body.permissions.map((permission: any) => permission.resource_id).sort()).to.deep.equal(
        [album, photo].sort(),
      );
      expect(shown.body.permissions[0], 'what it rests on stays on the server').not.to.have.property('delegation_ids');
      expect(
        (await api(server, 'DELETE', `/delegation/${onAlbum.body.delegation_id}`, aliceDelegations)).status,
      ).to.equal(204);
      expect((await introspect(first.body.access_token)).body).to.deep.equal({ active: false });
      expect((await introspect(upgraded.body.access_token)).body).to.deep.equal({ active: false });
      await api(server, 'DELETE', `/delegation/${onPhoto.body.delegation_id}`, aliceDelegations);
    });

    it('refuses malformed grant requests with invalid_request', async function () {
      const ticket = await ticketFor({ resource_id: photo, resource_scopes: ['view'] });
      for (const form of [
        {},
        { ticket, claim_token: aliceClaims },
        {
          ticket,
          claim_token: aliceClaims,
          claim_token_format: 'http://openid.net/specs/openid-connect-core-1_0.html#IDToken',
        },
        { ticket, claim_token_format: ACCESS_TOKEN_FORMAT },
      ]) {
        const answer = await redeem(form as Record<string, string>);
        expect(answer.status, JSON.stringify(form)).to.equal(400);
        expect(answer.body.error).to.equal('invalid_request');
      }
      const notActive = await asParty(ticket, 'not-a-token');
      expect(notActive.body.error).to.equal('invalid_grant');
    });
  });

  describe('the delegation store', function () {
    it("creates (201, delegation_id), lists and reads the caller's own, updates expires_at only, revokes softly", async function () {
      const expiresAt = inAnHour();
      const created = await delegate(aliceDelegations, {
        grantee_type: 'client',
        grantee_client_id: 'viewer-app',
        resource_id: photo,
        scopes: ['view'],
        expires_at: expiresAt,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const id = created.body.delegation_id;
      const path = `/delegation/${id}`;

      const read = await api(server, 'GET', path, aliceDelegations);
      expect(read.body).to.deep.include({
        delegation_id: id,
        grantee_type: 'client',
        grantee_client_id: 'viewer-app',
        resource_id: photo,
        scopes: ['view'],
        expires_at: expiresAt,
        revoked_at: null,
        status: 'active',
      });
      expect(
        (await api(server, 'GET', '/delegation', aliceDelegations)).body.map((item: any) => item.delegation_id),
      ).to.include(id);
      expect(
        (await api(server, 'GET', '/delegation', bobDelegations)).body.map((item: any) => item.delegation_id),
      ).not.to.include(id);
      expect((await api(server, 'GET', path, bobDelegations)).status).to.equal(404);

      // The grantee client's decisions about alice's tokens now see the delegation; about bob's, not.
      const viewer = { clientId: 'viewer-app', redirectUri: VIEWER_CALLBACK, secret: viewerSecret };
      const lastTokenDelegations = async () =>
        (
          await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')
        ).body.content[0].policyInput.delegations.map((grant: any) => grant.delegation_id);
      await userToken(server, viewer, 'alice', { scope: 'openid profile' });
      expect(await lastTokenDelegations()).to.include(id);
      await userToken(server, viewer, 'bob', { scope: 'openid profile' });
      expect(await lastTokenDelegations()).not.to.include(id);

      const later = new Date(Date.now() + 7_200_000).toISOString();
      const updated = await api(server, 'PUT', path, aliceDelegations, { expires_at: later });
      expect(updated.status, JSON.stringify(updated.body)).to.equal(200);
      expect(updated.body.expires_at).to.equal(later);
      const changed = await api(server, 'PUT', path, aliceDelegations, {
        expires_at: later,
        scopes: ['view', 'print'],
      });
      expect(changed.status).to.equal(400);
      expect(changed.body.field).to.equal('scopes');
      expect((await api(server, 'PUT', path, bobDelegations, { expires_at: later })).status).to.equal(404);
      expect((await api(server, 'DELETE', path, bobDelegations)).status).to.equal(404);

      expect((await api(server, 'DELETE', path, aliceDelegations)).status).to.equal(204);
      const revoked = (await api(server, 'GET', path, aliceDelegations)).body;
      expect(revoked.status).to.equal('revoked');
      expect(revoked.revoked_at).to.be.a('string');
      expect((await api(server, 'DELETE', path, aliceDelegations)).status).to.equal(204);
      expect((await api(server, 'PUT', path, aliceDelegations, { expires_at: later })).status).to.equal(400);
      expect((await api(server, 'GET', '/delegation/no-such-delegation', aliceDelegations)).status).to.equal(404);
      expect((await api(server, 'DELETE', '/delegation/no-such-delegation', aliceDelegations)).status).to.equal(404);

      await clientToken(server, 'viewer-app', viewerSecret, { scope: 'profile' });
      const [after] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect((after.policyInput.delegations ?? []).map((grant: any) => grant.delegation_id)).not.to.include(id);
    });

    it("lets only the owner delegate, within the resource's scopes and into the future", async function () {
      const notOwner = await delegate(bobDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'bob',
        resource_id: photo,
        scopes: ['view'],
      });
      expect(notOwner.status).to.equal(403);
      expect(notOwner.body.error).to.equal('access_denied');
      const beyond = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'bob',
        resource_id: photo,
        scopes: ['delete'],
      });
      expect(beyond.status).to.equal(400);
      expect(beyond.body.error).to.equal('invalid_scope');
      const past = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'bob',
        resource_id: photo,
        scopes: ['view'],
        expires_at: '2020-01-01T00:00:00Z',
      });
      expect(past.status).to.equal(400);
      expect(past.body.error).to.equal('invalid_request');
      const unknown = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'bob',
        resource_id: 'no-such-resource',
        scopes: ['view'],
      });
      expect(unknown.status).to.equal(400);
    });

    it('refuses bad bodies with a 400 naming the field, and calls without delegation_management', async function () {
      const cases: [unknown, string][] = [
        [{ grantee_type: 'group', resource_id: photo, scopes: ['view'] }, 'grantee_type'],
        [{ grantee_type: 'subject', resource_id: photo, scopes: ['view'] }, 'grantee_subject_id'],
        [
          {
            grantee_type: 'subject',
            grantee_subject_id: 'bob',
            grantee_client_id: 'viewer-app',
            resource_id: photo,
            scopes: ['view'],
          },
          'grantee_client_id',
        ],
        [
          { grantee_type: 'client', grantee_client_id: 'no-such-client', resource_id: photo, scopes: ['view'] },
          'grantee_client_id',
        ],
        [{ grantee_type: 'subject', grantee_subject_id: 'bob', resource_id: photo, scopes: [] }, 'scopes'],
        [
          {
            grantee_type: 'subject',
            grantee_subject_id: 'bob',
            resource_id: photo,
            scopes: ['view'],
            expires_at: 'tomorrow',
          },
          'expires_at',
        ],
        [{ grantee_type: 'subject', grantee_subject_id: 'bob', scopes: ['view'] }, 'resource_id'],
      ];
      for (const [body, field] of cases) {
        const answer = await delegate(aliceDelegations, body);
        expect(answer.status, JSON.stringify(body)).to.equal(400);
        expect(answer.body.field, JSON.stringify(body)).to.equal(field);
      }
      expect(
        (
          await delegate(alicePat, {
            grantee_type: 'subject',
            grantee_subject_id: 'bob',
            resource_id: photo,
            scopes: ['view'],
          })
        ).status,
      ).to.equal(403);
      expect((await api(server, 'GET', '/delegation', null)).status).to.equal(401);
    });

    it('revokes the delegations to a subject an operator deletes: whoever signs in again under its id inherits none', async function () {
      const viewer = { clientId: 'viewer-app', redirectUri: VIEWER_CALLBACK, secret: viewerSecret };
      await userToken(server, viewer, 'frank', { scope: 'openid' });
      const created = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'frank',
        resource_id: album,
        scopes: ['view'],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const frank = ((await server.admin('GET', '/subjects?q=frank')).body as { id: number; subjectId: string }[]).find(
        (subject) => subject.subjectId === 'frank',
      )!;
      expect((await server.admin('DELETE', `/subjects/${frank.id}`)).status).to.equal(204);
      expect(
        (await api(server, 'GET', `/delegation/${created.body.delegation_id}`, aliceDelegations)).body.status,
      ).to.equal('revoked');
      const again = await userToken(server, viewer, 'frank', { scope: 'openid profile' });
      const asked = await asParty(await ticketFor({ resource_id: album, resource_scopes: ['view'] }), again);
      expect(asked.status, JSON.stringify(asked.body)).to.equal(403);
    });

    it('stops handing an expired delegation to the policy', async function () {
      const soon = new Date(Date.now() + 1500).toISOString();
      const created = await delegate(aliceDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'dave',
        resource_id: album,
        scopes: ['edit'],
        expires_at: soon,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const daveClaims = await userToken(
        server,
        { clientId: 'viewer-app', redirectUri: VIEWER_CALLBACK, secret: viewerSecret },
        'dave',
        { scope: 'openid' },
      );
      // Each probe asks with a fresh ticket; allowed until expires_at, request_denied after.
      await eventually(
        async () =>
          (await asParty(await ticketFor({ resource_id: album, resource_scopes: ['edit'] }), daveClaims)).status ===
          403,
        20_000,
      );
      expect(
        (await api(server, 'GET', `/delegation/${created.body.delegation_id}`, aliceDelegations)).body.status,
      ).to.equal('expired');
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect(entry.policyInput.delegations).to.deep.equal([]);
    });
  });

  /**
   * The default pack lets a client exchange (RFC 8693) another client's token of a user who
   * delegated to it. Found 2026-11-29: the exchanged token carried every scope of the user's
   * token, and outlived the delegation by its whole lifetime.
   */
  describe('token exchange on a delegation', function () {
    const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
    const ALBUM_CALLBACK = 'http://127.0.0.1:1/album/cb';
    /** The resource server of alice's photos: the client that registered them (photos-app) serves them there. */
    const PHOTOS_API = 'https://photos.example.test/';
    const PHOTOS_API_TYPE = 'urn:example:photos-api';

    before(async function () {
      await updateOauthData(server, (data) => {
        data.resource_types[PHOTOS_API_TYPE] = { scopes: ['view', 'print', 'read'] };
      });
      const photosClient = (await server.admin('GET', '/clients/photos-app')).body;
      const made = await server.admin('POST', '/resource-servers', {
        resourceIndicator: PHOTOS_API,
        clientId: photosClient.id,
        typeUris: [PHOTOS_API_TYPE],
      });
      expect(made.status, JSON.stringify(made.body)).to.equal(201);
    });

    it('carries only what the delegation grants, and ends with it, as do the tokens exchanged from it', async function () {
      const albumSecret = await confidentialClient(server, 'album-app', {
        scopes: ['openid', 'view', 'print'],
        redirectUris: [ALBUM_CALLBACK],
      });
      const aliceAlbum = await userToken(
        server,
        { clientId: 'album-app', redirectUri: ALBUM_CALLBACK, secret: albumSecret },
        'alice',
        { scope: 'openid view print' },
      );
      const printerSecret = await confidentialClient(server, 'printer-service', { scopes: ['view', 'print'] });
      const exchange = (subjectToken: string, target: Record<string, string> = { resource: PHOTOS_API }) =>
        postForm(
          server,
          '/token',
          {
            grant_type: EXCHANGE,
            subject_token: subjectToken,
            subject_token_type: ACCESS_TOKEN_FORMAT,
            ...target,
          },
          { Authorization: basic('printer-service', printerSecret) },
        );
      expect((await exchange(aliceAlbum)).body.error_description).to.contain('issued to another client');

      const created = await delegate(aliceDelegations, {
        grantee_type: 'client',
        grantee_client_id: 'printer-service',
        resource_id: photo,
        scopes: ['print'],
        expires_at: inAnHour(),
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const exchanged = await exchange(aliceAlbum);
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      expect(exchanged.body.scope, 'what alice delegated, not all her token holds').to.equal('print');
      // Found 2026-11-29: a delegation on a photo let the grantee exchange her tokens for any resource
      // server, or for none (a token every resource server reads), with the delegated scope names.
      expect((await exchange(aliceAlbum, {})).body.error_description, 'no target').to.contain(
        'issued to another client',
      );
      const elsewhere = await server.admin('POST', '/resource-servers', {
        resourceIndicator: 'https://bank.example.test/',
        typeUris: [PHOTOS_API_TYPE],
      });
      expect(elsewhere.status, JSON.stringify(elsewhere.body)).to.equal(201);
      expect(
        (await exchange(aliceAlbum, { resource: 'https://bank.example.test/' })).body.error_description,
        'another resource server, with the same scope names',
      ).to.contain('issued to another client');
      // printer-service exchanges its own token again: that one rests on the delegation too.
      const again = await exchange(exchanged.body.access_token);
      expect(again.status, JSON.stringify(again.body)).to.equal(200);
      // Found 2026-11-29: exchanged again, its token counted as printer-service's own, for any target.
      const elsewhereAgain = await exchange(exchanged.body.access_token, { resource: 'https://bank.example.test/' });
      expect(elsewhereAgain.status, JSON.stringify(elsewhereAgain.body)).to.equal(400);
      expect(elsewhereAgain.body.error_description).to.contain('delegat');
      // Found 2026-11-29: as a claim token it made printer-service alice, the owner of every resource of hers.
      const ticket = (
        await api(server, 'POST', '/permission', alicePat, [{ resource_id: album, resource_scopes: ['view', 'edit'] }])
      ).body.ticket as string;
      const asAlice = await postForm(
        server,
        '/token',
        {
          grant_type: UMA_GRANT,
          ticket,
          claim_token: exchanged.body.access_token,
          claim_token_format: ACCESS_TOKEN_FORMAT,
        },
        { Authorization: basic('printer-service', printerSecret) },
      );
      expect(asAlice.status, JSON.stringify(asAlice.body)).to.equal(400);
      expect(asAlice.body).to.include({ error: 'invalid_grant' });
      expect(asAlice.body.error_description).to.contain('delegation');
      for (const token of [exchanged.body.access_token, again.body.access_token]) {
        const shown = (await introspect(token)).body;
        expect(shown).to.include({ active: true, sub: 'alice', client_id: 'printer-service', scope: 'print' });
        expect(shown, 'what it rests on stays on the server').not.to.have.property('delegation_ids');
      }

      expect(
        (await api(server, 'DELETE', `/delegation/${created.body.delegation_id}`, aliceDelegations)).status,
      ).to.equal(204);
      for (const token of [exchanged.body.access_token, again.body.access_token])
        expect((await introspect(token)).body).to.deep.equal({ active: false });
      expect((await introspect(aliceAlbum)).body, "alice's own token is hers").to.include({ active: true });
    });

    /**
     * Found 2026-11-29: every delegation to the client and to the user reached each decision
     * about a token, whoever made it: a client 10,000 users had delegated to carried 2.2 MB into
     * each /token, and 2,000 large delegations to a user made by another made hers 503.
     */
    it("gives a decision what the token's user delegated to the client, never what others delegated to either", async function () {
      const scannerSecret = await confidentialClient(server, 'scanner-service', { scopes: ['view', 'print'] });
      const albumSecret = await confidentialClient(server, 'scan-album-app', {
        scopes: ['openid', 'view', 'print'],
        redirectUris: [ALBUM_CALLBACK],
      });
      const aliceAlbum = await userToken(
        server,
        { clientId: 'scan-album-app', redirectUri: ALBUM_CALLBACK, secret: albumSecret },
        'alice',
        { scope: 'openid view print' },
      );
      const bobPat = await userToken(server, photosApp, 'bob', {
        resource: 'urn:as:introspect',
        scope: 'openid uma_protection',
      });
      const bobsPhoto = (await api(server, 'POST', RESOURCES, bobPat, { name: 'Dunes', resource_scopes: ['print'] }))
        .body._id;
      const toScanner = async (token: string, resourceId: string): Promise<string> => {
        const created = await delegate(token, {
          grantee_type: 'client',
          grantee_client_id: 'scanner-service',
          resource_id: resourceId,
          scopes: ['print'],
          expires_at: inAnHour(),
        });
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
        return created.body.delegation_id;
      };
      const byAlice = await toScanner(aliceDelegations, photo);
      await toScanner(bobDelegations, bobsPhoto);
      // Anyone may delegate to alice herself: that is hers on bob's resource (UMA), not her tokens' business.
      const toAlice = await delegate(bobDelegations, {
        grantee_type: 'subject',
        grantee_subject_id: 'alice',
        resource_id: bobsPhoto,
        scopes: ['print'],
        expires_at: inAnHour(),
      });
      expect(toAlice.status, JSON.stringify(toAlice.body)).to.equal(201);
      const delegationsGiven = async (endpoint: string): Promise<string[]> => {
        const [entry] = (await server.admin('GET', `/audit-logs?endpoint=${endpoint}&size=1&sort=id,desc`)).body
          .content;
        return entry.policyInput.delegations.map((grant: { delegation_id: string }) => grant.delegation_id);
      };

      const exchanged = await postForm(
        server,
        '/token',
        {
          grant_type: EXCHANGE,
          subject_token: aliceAlbum,
          subject_token_type: ACCESS_TOKEN_FORMAT,
          resource: PHOTOS_API,
        },
        { Authorization: basic('scanner-service', scannerSecret) },
      );
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      expect(await delegationsGiven('/token'), "alice's exchange").to.deep.equal([byAlice]);
      expect((await introspect(exchanged.body.access_token)).body).to.include({ active: true, scope: 'print' });
      expect(await delegationsGiven('/introspect'), "alice's token").to.deep.equal([byAlice]);
      expect(await clientToken(server, 'scanner-service', scannerSecret, { scope: 'print' })).to.be.a('string');
      expect(await delegationsGiven('/token'), 'the client alone: no user delegated as it').to.deep.equal([]);
    });
  });

  describe('discovery', function () {
    it('publishes /.well-known/uma2-configuration and the UMA fields in OpenID discovery', async function () {
      for (const path of ['/.well-known/uma2-configuration', '/.well-known/openid-configuration']) {
        const document = (await (await server.request(path)).json()) as any;
        expect(document.issuer, path).to.equal(server.config.issuer);
        expect(document.permission_endpoint, path).to.equal(`${server.config.issuer}/permission`);
        expect(document.resource_registration_endpoint, path).to.equal(
          `${server.config.issuer}/resource_registration/resource`,
        );
        expect(document.uma_profiles_supported, path).to.deep.equal([]);
        expect(document.grant_types_supported, path).to.include(UMA_GRANT);
        expect(document.token_endpoint, path).to.equal(`${server.config.issuer}/token`);
        expect(document.introspection_endpoint, path).to.equal(`${server.config.issuer}/introspect`);
      }
    });
  });
});
