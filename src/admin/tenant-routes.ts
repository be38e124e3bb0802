import type Router from '@koa/router';
import { readJsonBody } from '../http/body.js';
import { HttpError, notFound } from '../http/errors.js';
import { assertValid } from '../http/validation.js';
import { loadProviderSecrets } from '../oauth/index.js';
import {
  ConflictError,
  DEFAULT_TENANT,
  type Sealer,
  type Store,
  type StoredDoc,
  type TenantCollection,
} from '../store/index.js';
import { TENANTS_COLLECTION, isTenantId, registerTenant } from '../tenancy/index.js';
import { answerPage, LIST_COUNT_AT_MOST, listPage, listSearch, pageAndTotal } from './paging.js';
import type { AdminContext } from './state.js';

/** The Admin API's segment for the registry of tenants. */
export const TENANTS_SEGMENT = 'tenants';

/** What `q` searches in GET /tenants. */
export const TENANT_SEARCH_FIELDS = ['id'];

/** The body of POST /tenants. */
export const TENANT_INPUT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id'],
  properties: {
    id: {
      type: 'string',
      pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$',
      description:
        'the tenant id (X-Tenant-Id): 1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit',
    },
  },
} as const;

interface TenantDoc extends StoredDoc {
  id: string;
  createdAt: string;
}

/**
 * GET /tenants (paged, searched), POST /tenants and GET /tenants/{id}: the tenants that exist
 * besides the default one (src/tenancy: those configured in TENANTS, and those made here or by an
 * Admin API write naming them). The registry is server-wide; a tenant's creation is audited as
 * that tenant's. A tenant made here gets its own signing keys at once (src/oauth/keys.ts; one made
 * by a write that names it gets them on its first use). Tenants are not deleted: their records,
 * tokens, keys and audit entries stay theirs.
 */
export function tenantRoutes(
  router: Router,
  store: Store,
  configured: readonly string[],
  maxBodyBytes: number,
  sealer: Sealer,
): void {
  const base = `/${TENANTS_SEGMENT}`;
  const tenants = (): TenantCollection<TenantDoc> => store.collection<TenantDoc>(TENANTS_COLLECTION, DEFAULT_TENANT);
  // The configured tenants exist from the start; they are written into the registry once, at the first call that reads it.
  let registered: Promise<void> | null = null;
  const withConfigured = async (): Promise<void> => {
    registered ??= Promise.all(configured.map((id) => registerTenant(store, id))).then(
      () => undefined,
      (error: unknown) => {
        registered = null;
        throw error;
      },
    );
    await registered;
  };
  const audited = (ctx: AdminContext, tenantId: string | null) => {
    if (ctx.state.audit) ctx.state.audit.tenantId = tenantId;
  };
  const present = ({ id, createdAt }: TenantDoc) => ({ id, createdAt, configured: configured.includes(id) });

  router.get(base, async (ctx) => {
    audited(ctx, null);
    await withConfigured();
    const page = listPage(ctx);
    const search = listSearch(ctx, TENANT_SEARCH_FIELDS);
    const { found, total } = await pageAndTotal(
      page,
      (limit) => tenants().find({}, { sort: { field: 'id', direction: 'asc' }, skip: page.offset, limit, search }),
      () => tenants().count({}, search, LIST_COUNT_AT_MOST),
    );
    ctx.body = answerPage(ctx, page, found, total).map(present);
  });

  router.post(base, async (ctx) => {
    audited(ctx, null);
    const body = await readJsonBody(ctx, maxBodyBytes);
    ctx.state.body = body;
    assertValid<{ id: string }>(TENANT_INPUT_SCHEMA, body);
    if (!isTenantId(body.id))
      throw new HttpError(400, 'invalid_request', `id ${DEFAULT_TENANT} is the default tenant's`, { field: 'id' });
    audited(ctx, body.id);
    await withConfigured();
    const created: TenantDoc = { id: body.id, createdAt: new Date().toISOString() };
    try {
      await tenants().insert(created);
    } catch (error) {
      if (error instanceof ConflictError)
        throw new HttpError(409, 'conflict', `the tenant ${body.id} already exists`, { field: 'id' });
      throw error;
    }
    await loadProviderSecrets(store, sealer, body.id);
    ctx.status = 201;
    ctx.body = present(created);
  });

  router.get(`${base}/:id`, async (ctx) => {
    audited(ctx, null);
    await withConfigured();
    const found = isTenantId(ctx.params.id) ? await tenants().get(ctx.params.id) : null;
    if (!found) throw notFound(`no tenant ${JSON.stringify(ctx.params.id)}`);
    ctx.body = present(found);
  });
}
