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
    const owner = await ownerOf(ctx);
    const records = await umaResources(store, ctx.state.tenant.name).find(ownerFilter(owner), {
      sort: { field: 'createdAt', direction: 'asc' },
    });
    ctx.body = records.map((record) => record.id);
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
