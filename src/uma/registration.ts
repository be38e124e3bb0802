import { resourceTypeRecords } from '../catalog/index.js';
import { randomUUID } from 'node:crypto';
import type Router from '@koa/router';
import { readJsonBody } from '../http/body.js';
import { HttpError, notFound } from '../http/errors.js';
import { assertValid } from '../http/validation.js';
import type { Store } from '../store/index.js';
import {
  ownedResource,
  ownerFilter,
  resourceDescription,
  umaResources,
  type ResourceOwner,
  type UmaResourceRecord,
} from './resources.js';
import { RESOURCE_DESCRIPTION, type ResourceDescription } from './schemas.js';
import type { ApiContext, ApiState, UmaDeps } from './deps.js';
import { requestIssuer } from '../tenancy/index.js';

export const RESOURCE_REGISTRATION_PATH = '/resource_registration/resource';

/** Resources read a page at a time for a list: each may be 30 KB (a description and 100 scopes of 256 characters). */
const LIST_PAGE = 200;

/**
 * One more resource of this owner stays within UMA_RESOURCES_PER_OWNER, else 409: one resource
 * server could otherwise register them without end (found 2026-11-29: nothing bounded them).
 */
async function assertRoomFor(deps: UmaDeps, tenant: string, owner: ResourceOwner): Promise<void> {
  const held = await umaResources(deps.store, tenant).count(ownerFilter(owner), undefined, deps.resourcesPerOwner);
  if (held >= deps.resourcesPerOwner)
    throw new HttpError(409, 'conflict', `an owner registers at most ${deps.resourcesPerOwner} resources`);
}

/**
 * The ids of the owner's resources, oldest first (UMA Federated Authorization §3.4.5), read a page
 * at a time by keyset with the event loop given back between pages, so that neither the loop nor
 * memory holds every record at once (found 2026-11-29: one list of 20,000 large ones held the loop
 * 1.3 s and 1.2 GB).
 */
async function resourceIdsOf(store: Store, tenant: string, owner: ResourceOwner): Promise<string[]> {
  const ids: string[] = [];
  let cursor: { at: string; seen: number } | undefined;
  for (;;) {
    const page = await umaResources(store, tenant).find(ownerFilter(owner), {
      sort: { field: 'createdAt', direction: 'asc' },
      limit: LIST_PAGE,
      ...(cursor ? { startAt: cursor.at, skip: cursor.seen } : {}),
    });
    ids.push(...page.map((record) => record.id));
    if (page.length < LIST_PAGE) return ids;
    const last = page.at(-1)!.createdAt;
    const atLast = page.filter((record) => record.createdAt === last).length;
    cursor = { at: last, seen: cursor?.at === last ? cursor.seen + atLast : atLast };
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * UMA 2.0 Federated Authorization §3: a resource server registers, lists, reads, replaces and
 * deletes the resources it protects for their owner (the caller of its PAT). Another owner's
 * resource answers 404, exactly as an unknown one.
 */
export function resourceRegistrationRoutes(
  router: Router<ApiState>,
  deps: UmaDeps,
  ownerOf: (ctx: ApiContext) => Promise<ResourceOwner>,
): void {
  const { store } = deps;
  const description = async (ctx: ApiContext) => {
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<ResourceDescription>(RESOURCE_DESCRIPTION, body);
    await assertWithinTypeCeiling(store, ctx.state.tenant.name, body);
    return body;
  };
  const owned = async (ctx: ApiContext, owner: ResourceOwner) => {
    const record = await ownedResource(store, ctx.state.tenant.name, owner, String(ctx.params.resourceId));
    if (!record) throw notFound('no resource with this id is registered for the caller');
    return record;
  };

  router.post(RESOURCE_REGISTRATION_PATH, async (ctx) => {
    const owner = await ownerOf(ctx);
    const body = await description(ctx);
    await assertRoomFor(deps, ctx.state.tenant.name, owner);
    const record = await umaResources(store, ctx.state.tenant.name).insert({
      id: randomUUID(),
      ...fieldsOf(body),
      ownerSub: owner.sub,
      ownerClientId: owner.clientId,
      createdAt: new Date().toISOString(),
    });
    ctx.status = 201;
    ctx.set('Location', `${requestIssuer(deps.issuer, ctx.state.tenant)}${RESOURCE_REGISTRATION_PATH}/${record.id}`);
    ctx.body = { _id: record.id };
  });

  router.get(RESOURCE_REGISTRATION_PATH, async (ctx) => {
    ctx.body = await resourceIdsOf(store, ctx.state.tenant.name, await ownerOf(ctx));
  });

  router.get(`${RESOURCE_REGISTRATION_PATH}/:resourceId`, async (ctx) => {
    ctx.body = resourceDescription(await owned(ctx, await ownerOf(ctx)));
  });

  router.put(`${RESOURCE_REGISTRATION_PATH}/:resourceId`, async (ctx) => {
    const owner = await ownerOf(ctx);
    const record = await owned(ctx, owner);
    const body = await description(ctx);
    await umaResources(store, ctx.state.tenant.name).upsert({ ...record, ...fieldsOf(body) });
    ctx.body = { _id: record.id };
  });

  router.delete(`${RESOURCE_REGISTRATION_PATH}/:resourceId`, async (ctx) => {
    const record = await owned(ctx, await ownerOf(ctx));
    await umaResources(store, ctx.state.tenant.name).delete(record.id);
    // What hangs on it dies with it: its delegations here; the RPTs that permit it are not found
    // from now on (src/oauth/shared/owned-artefacts.ts).
    await deps.resourceDeleted(ctx.state.tenant.name, record.id);
    ctx.status = 204;
  });
}

function fieldsOf(
  body: ResourceDescription,
): Pick<UmaResourceRecord, 'name' | 'type' | 'resourceScopes' | 'description' | 'iconUri'> {
  return {
    name: body.name ?? null,
    type: body.type ?? null,
    resourceScopes: body.resource_scopes,
    description: body.description ?? null,
    iconUri: body.icon_uri ?? null,
  };
}

/** The spec's scope ceiling: a resource of a type the Admin API defines with scopes may name only those. */
async function assertWithinTypeCeiling(store: Store, tenant: string, body: ResourceDescription): Promise<void> {
  if (!body.type) return;
  const definition = await resourceTypeRecords(store, tenant).findOne({ typeUri: body.type });
  if (!Array.isArray(definition?.scopes)) return;
  const beyond = body.resource_scopes.filter((scope) => !definition.scopes!.includes(scope));
  if (beyond.length)
    throw new HttpError(
      400,
      'invalid_scope',
      `resource_scopes beyond the scopes of type ${body.type}: ${beyond.join(' ')}`,
      { field: 'resource_scopes' },
    );
}
