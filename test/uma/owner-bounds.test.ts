import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { DELEGATION_KEPT_MS, DELEGATIONS_COLLECTION } from '../../src/delegation/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import { UMA_RESOURCES_COLLECTION } from '../../src/uma/resources.js';
import { clientToken, confidentialClient } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { api } from './support.js';

const RESOURCES = '/resource_registration/resource';
const RESOURCES_PER_OWNER = 500;
const DELEGATIONS_PER_OWNER = 3;

/**
 * What one owner may keep (found 2026-11-29: nothing bounded it): UMA resources
 * (UMA_RESOURCES_PER_OWNER) and delegations (DELEGATIONS_PER_OWNER), revoked and expired ones
 * deleted a while after, and the registration list read a page at a time.
 */
describe('What one owner keeps: UMA resources and delegations', function () {
  let server: TestServer;
  let pat: string;
  let delegating: string;
  let otherPat: string;

  before(async function () {
    // Its own server: bounds of its own.
    server = await readyServer({
      UMA_RESOURCES_PER_OWNER: String(RESOURCES_PER_OWNER),
      DELEGATIONS_PER_OWNER: String(DELEGATIONS_PER_OWNER),
    });
    const scopes = ['uma_protection', 'delegation_management'];
    const secret = await confidentialClient(server, 'bounded-rs', { scopes });
    const otherSecret = await confidentialClient(server, 'other-bounded-rs', { scopes });
    pat = await clientToken(server, 'bounded-rs', secret, { resource: 'urn:as:introspect', scope: 'uma_protection' });
    delegating = await clientToken(server, 'bounded-rs', secret, {
      resource: 'urn:as:delegation',
      scope: 'delegation_management',
    });
    otherPat = await clientToken(server, 'other-bounded-rs', otherSecret, {
      resource: 'urn:as:introspect',
      scope: 'uma_protection',
    });
  });
  after(async function () {
    await server?.close();
  });

  const register = (token: string, name: string) =>
    api(server, 'POST', RESOURCES, token, { name, resource_scopes: ['read', 'print'] });

  it('registers at most UMA_RESOURCES_PER_OWNER resources for an owner (409 past it), and lists them all in order, a page at a time', async function () {
    const first = await register(pat, 'first');
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    const [stored] = await server.store
      .collection(UMA_RESOURCES_COLLECTION, DEFAULT_TENANT)
      .find({ ownerClientId: 'bounded-rs' });
    // As registered before it, in groups that share a createdAt, some across the list's pages.
    const seeded = Array.from({ length: RESOURCES_PER_OWNER - 2 }, (_, index) => ({
      ...stored!,
      id: `seeded-${String(index).padStart(4, '0')}-${randomUUID()}`,
      createdAt: new Date(Date.parse(stored!.createdAt as string) - 10_000 + Math.floor(index / 7)).toISOString(),
    }));
    await server.store.collection(UMA_RESOURCES_COLLECTION, DEFAULT_TENANT).insertMany(seeded);

    const last = await register(pat, 'last');
    expect(last.status, JSON.stringify(last.body)).to.equal(201);
    const beyond = await register(pat, 'one too many');
    expect(beyond.status, JSON.stringify(beyond.body)).to.equal(409);
    expect(beyond.body.error_description).to.contain(`at most ${RESOURCES_PER_OWNER} resources`);
    expect((await register(otherPat, 'another owner')).status, "another owner's room is its own").to.equal(201);

    const listed = await api(server, 'GET', RESOURCES, pat);
    expect(listed.status).to.equal(200);
    expect(listed.body).to.have.length(RESOURCES_PER_OWNER);
    expect(new Set(listed.body).size, 'each once').to.equal(RESOURCES_PER_OWNER);
    expect(listed.body, 'oldest first').to.deep.equal([
      ...seeded.map((resource) => resource.id),
      first.body._id,
      last.body._id,
    ]);
  });

  it('does not count the delegations an owner revoked before delegations were deleted, once that is long ago', async function () {
    const scopes = ['uma_protection', 'delegation_management'];
    const secret = await confidentialClient(server, 'legacy-rs', { scopes });
    const legacyPat = await clientToken(server, 'legacy-rs', secret, {
      resource: 'urn:as:introspect',
      scope: 'uma_protection',
    });
    const legacyDelegating = await clientToken(server, 'legacy-rs', secret, {
      resource: 'urn:as:delegation',
      scope: 'delegation_management',
    });
    const resource = (await register(legacyPat, 'legacy')).body._id as string;
    const monthAgo = new Date(Date.now() - 30 * 24 * 3_600_000).toISOString();
    // As an earlier release stored them: revoked, and no deletion time.
    await server.store.collection(DELEGATIONS_COLLECTION, DEFAULT_TENANT).insertMany(
      Array.from({ length: DELEGATIONS_PER_OWNER }, (_, index) => ({
        id: `legacy-${index}`,
        ownerSub: null,
        ownerClientId: 'legacy-rs',
        granteeType: 'subject',
        granteeSubjectId: `old-friend-${index}`,
        granteeClientId: null,
        resourceId: resource,
        scopes: ['read'],
        validUntil: null,
        createdAt: monthAgo,
        revokedAt: monthAgo,
      })),
    );
    const created = await api(server, 'POST', '/delegation', legacyDelegating, {
      grantee_type: 'subject',
      grantee_subject_id: 'new-friend',
      resource_id: resource,
      scopes: ['read'],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
  });

  it('keeps at most DELEGATIONS_PER_OWNER delegations for an owner (409 past it); a revoked one is deleted a while after', async function () {
    const own = (await api(server, 'GET', RESOURCES, pat)).body[0] as string;
    const delegate = (grantee: string) =>
      api(server, 'POST', '/delegation', delegating, {
        grantee_type: 'subject',
        grantee_subject_id: grantee,
        resource_id: own,
        scopes: ['read'],
      });
    const made: string[] = [];
    for (let index = 0; index < DELEGATIONS_PER_OWNER; index++) {
      const created = await delegate(`friend-${index}`);
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      made.push(created.body.delegation_id);
    }
    const beyond = await delegate('one-too-many');
    expect(beyond.status, JSON.stringify(beyond.body)).to.equal(409);
    expect(beyond.body.error_description).to.contain(`at most ${DELEGATIONS_PER_OWNER} delegations`);

    const before = Date.now();
    expect((await api(server, 'DELETE', `/delegation/${made[0]}`, delegating)).status).to.equal(204);
    const revoked = await server.store.collection(DELEGATIONS_COLLECTION, DEFAULT_TENANT).get(made[0]!);
    expect(revoked?.revokedAt).to.be.a('string');
    expect(revoked?.expiresAt, 'deleted by the store a while after').to.be.within(
      before + DELEGATION_KEPT_MS,
      Date.now() + DELEGATION_KEPT_MS,
    );
    expect((await delegate('still-too-many')).status, 'a revoked one counts until it is deleted').to.equal(409);
    const active = await server.store.collection(DELEGATIONS_COLLECTION, DEFAULT_TENANT).get(made[1]!);
    expect(active).to.include({ revokedAt: null }).and.not.to.have.property('expiresAt');

    // A delegation given an end is deleted a while after it; given none again, it is kept until revoked.
    const path = `/delegation/${made[1]}`;
    const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
    expect((await api(server, 'PUT', path, delegating, { expires_at: inAnHour })).status).to.equal(200);
    const dated = await server.store.collection(DELEGATIONS_COLLECTION, DEFAULT_TENANT).get(made[1]!);
    expect(dated?.expiresAt).to.equal(Date.parse(inAnHour) + DELEGATION_KEPT_MS);
    const open = await api(server, 'PUT', path, delegating, { expires_at: null });
    expect(open.status, JSON.stringify(open.body)).to.equal(200);
    expect(open.body).to.include({ expires_at: null, status: 'active' });
    const undated = await server.store.collection(DELEGATIONS_COLLECTION, DEFAULT_TENANT).get(made[1]!);
    expect(undated?.expiresAt ?? null, 'the store keeps it').to.equal(null);
  });
});
