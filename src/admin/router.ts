import Router from '@koa/router';
import { auditFactsOf, type AuditLog } from '../audit/index.js';
import { readJsonBody } from '../http/body.js';
import { badRequest, notFound } from '../http/errors.js';
import { isNewTenant, isTenantId, storeTenant } from '../tenancy/index.js';
import { auditLogRoutes } from './audit-routes.js';
import { decisionRoutes, type DecisionRouteOptions } from './decisions.js';
import { ADMIN_PREFIX } from '../http/admin-path.js';
import { COLLECTIONS, definitionFor, type CollectionDefinition } from '../catalog/index.js';
import { openApiRoute } from './openapi.js';
import { RecordRepository, type RecordCheck, type RemovalCheck, type StoredRecord } from '../records/index.js';
import { clientSecretHashing } from '../oauth/index.js';
import { HISTORY_COLLECTIONS, RecordHistory } from './history.js';
import { historyRoutes } from './history-routes.js';
import { answerPage, LIST_COUNT_AT_MOST, listPage, listSearch, pageAndTotal } from './paging.js';
import { apiKeyRoutes, type AdminApiKeys } from './api-keys.js';
import { assertMayMakeTenant, assertSignInIdpKept, assertTenantReached } from './auth.js';
import { tenantRoutes } from './tenant-routes.js';
import { revokeAfterChange, tokenRevocationRoutes, type LogoutNotifier } from './token-revocation.js';
import { clientSecretRoutes } from './client-secret.js';
import { policyLabRoutes, POLICY_COLLECTIONS, type PolicyLabRouteOptions } from './policy-lab.js';
import type { Store } from '../store/index.js';
import type { AdminContext } from './state.js';
import type { AdminChange, TenantSignalsView } from '../signals/index.js';

export interface AdminOptions {
  /** The bootstrap key and the named keys (GET/POST /api-keys…). */
  keys: AdminApiKeys;
  /** Seals the collections' `sealedFields` before they are stored. */
  sealer: import('../store/index.js').Sealer;
  maxBodyBytes: number;
  audit: AuditLog;
  /** The decision playground's engine (POST /decisions, POST /audit-logs/{id}/replay). */
  policy: DecisionRouteOptions['policy'];
  /** The issuer URL: the server the OpenAPI document names. */
  issuer: string;
  /** Extra checks per collection path (e.g. policy-rules → the engine's parse check). */
  checks?: Record<string, RecordCheck>;
  /** Checks of a delete per collection path (e.g. policy-rules → the bundle without the rule). */
  removalChecks?: Record<string, RemovalCheck>;
  /** Versions kept per record of the collections with a history (POLICY_HISTORY_VERSIONS; default 50). */
  historyVersions?: number;
  /** The tenants configured (TENANTS): GET /tenants lists them with those made since. */
  tenants?: readonly string[];
  /** Extra response fields per collection path (e.g. policy-data → inBundle). */
  decorate?: Record<string, (record: StoredRecord) => Record<string, unknown>>;
  /**
   * Impact analysis and shadow policies (POST /policy-impact, /policy-shadow…): the lab, the
   * checks of one policy file (before the whole bundle's) and the recorded inputs every change is tried on.
   */
  policyLab?: Pick<PolicyLabRouteOptions, 'lab' | 'recordedInputs' | 'signalPreview'> & {
    fileChecks: Record<string, RecordCheck>;
  };
  /** Back-channel logout: tells the clients of a subject's sessions, before its tokens are revoked (absent: nobody is told). */
  logoutNotices?: LogoutNotifier;
  /**
   * Told of each change that may concern Shared Signals receivers (src/signals), once it is stored
   * and before it is answered, so that its events are in the outbox when the operator hears of it.
   */
  changed?: (change: AdminChange) => Promise<unknown>;
  /** GET /outbox: the durable outbox's state (src/outbox), absent: not served. */
  outbox?: OutboxView;
  /** GET /signals/streams: a tenant's Shared Signals streams and what waits for them (src/signals), absent: not served. */
  signalsView?: (tenant: string) => Promise<TenantSignalsView>;
  /** ADMIN_SIGN_IN_IDP: the identity provider record only the admin role writes (assertSignInIdpKept). */
  signInIdp?: string | null;
}

/** What GET /outbox shows of the outbox (src/outbox's Outbox). */
export interface OutboxView {
  state(): Promise<object>;
  failing(limit?: number): Promise<
    {
      id: number;
      topic: string;
      stream: string;
      createdAt: number;
      attempts: number;
      notBefore: number;
      lastError?: string;
    }[]
  >;
}

/** Upsert-by-field operations of the spec: PUT /policy-rules/by-path?path=…, PUT /policy-data/by-key?dataKey=…. */
export const UPSERT_BY: Record<string, { route: string; field: string }> = {
  'policy-rules': { route: 'by-path', field: 'path' },
  'policy-data': { route: 'by-key', field: 'dataKey' },
};

export function adminRouter(store: import('../store/index.js').Store, options: AdminOptions): Router {
  // Exact spelling only: every other spelling is refused by the gate in front (see gate.ts).
  const router = new Router({ prefix: ADMIN_PREFIX, sensitive: true, strict: true });
  router.get('/openapi.json', openApiRoute({ issuer: options.issuer, upserts: UPSERT_BY }));
  apiKeyRoutes(router, options.keys, options.maxBodyBytes);
  tenantRoutes(router, store, options.tenants ?? [], options.maxBodyBytes, options.sealer);
  auditLogRoutes(router, options.audit, (ctx) => tenantOf(ctx));
  decisionRoutes(router, {
    policy: options.policy,
    audit: options.audit,
    maxBodyBytes: options.maxBodyBytes,
    tenantOf,
  });
  const histories = new Map<string, RecordHistory>();
  for (const definition of COLLECTIONS) {
    const history = HISTORY_COLLECTIONS.includes(definition.path)
      ? new RecordHistory(store, definition.path, options.historyVersions ?? 50)
      : undefined;
    if (history) histories.set(definition.path, history);
    const records = new RecordRepository(store, definition, {
      sealer: options.sealer,
      secrets: clientSecretHashing(options.sealer),
      check: options.checks?.[definition.path],
      checkRemoval: options.removalChecks?.[definition.path],
      history,
    });
    collectionRoutes(router, records, history, options, store);
  }
  if (options.policyLab) {
    const { fileChecks, ...lab } = options.policyLab;
    const recordsOf = (check: (path: string) => RecordCheck | undefined) =>
      Object.fromEntries(
        Object.keys(POLICY_COLLECTIONS).map((path) => [
          path,
          new RecordRepository(store, definitionFor(path)!, {
            sealer: options.sealer,
            check: check(path),
            history: histories.get(path),
          }),
        ]),
      ) as PolicyLabRouteOptions['checkedRecords'];
    policyLabRoutes(router, {
      ...lab,
      audit: options.audit,
      maxBodyBytes: options.maxBodyBytes,
      tenantOf: (ctx) => tenantOf(ctx),
      checkedRecords: recordsOf((path) => fileChecks[path]),
      uncheckedRecords: recordsOf(() => undefined),
    });
  }
  router.get('/outbox', async (ctx) => {
    const { outbox } = options;
    if (!outbox) throw notFound('this server delivers no outbox');
    const [state, failing] = await Promise.all([outbox.state(), outbox.failing()]);
    ctx.body = {
      ...state,
      failingEntries: failing.map((entry) => ({
        id: entry.id,
        topic: entry.topic,
        stream: entry.stream,
        createdAt: new Date(entry.createdAt).toISOString(),
        attempts: entry.attempts,
        nextAttemptAt: new Date(entry.notBefore).toISOString(),
        lastError: entry.lastError ?? null,
      })),
    };
  });
  router.get('/signals/streams', async (ctx) => {
    const { signalsView } = options;
    if (!signalsView) throw notFound('this server transmits no Shared Signals');
    ctx.body = await signalsView(storeTenant(tenantOf(ctx)));
  });
  tokenRevocationRoutes(router, store, (ctx) => tenantOf(ctx), options.logoutNotices, options.changed);
  clientSecretRoutes(router, store, options.sealer, options.maxBodyBytes, (ctx) => tenantOf(ctx), options.changed);
  return router;
}

function collectionRoutes(
  router: Router,
  records: RecordRepository,
  history: RecordHistory | undefined,
  options: AdminOptions,
  store: Store,
): void {
  const { path } = records.definition;
  const show = (record: StoredRecord) => ({ ...records.present(record), ...options.decorate?.[path]?.(record) });
  const body = async (ctx: AdminContext) => {
    const parsed = await readJsonBody(ctx, options.maxBodyBytes);
    // The audit entry reads an object body's fields; any other JSON is refused by the record's schema.
    if (isObject(parsed)) ctx.state.body = parsed;
    return parsed;
  };
  /** A create, replace or delete of the record `key` in `tenantId`: refused for ADMIN_SIGN_IN_IDP's unless by an admin. */
  const assertWritable = (ctx: AdminContext, tenantId: string | null, key: unknown) =>
    assertSignInIdpKept(ctx, options.signInIdp ?? null, { collection: path, tenantId, key });
  /** A create in a tenant that does not exist yet makes it: refused to a role that may not make tenants. */
  const assertCreatable = async (ctx: AdminContext, tenantId: string | null, key: unknown) => {
    assertWritable(ctx, tenantId, key);
    if (await isNewTenant(store, tenantId)) assertMayMakeTenant(ctx, tenantId!);
  };

  router.get(`/${path}`, async (ctx) => {
    const page = listPage(ctx);
    const search = listSearch(ctx, records.definition.searchFields);
    const tenantId = tenantOf(ctx);
    // bundledOnly filters the page after it is read, so no total is known for it.
    const bundledOnly = path === 'policy-data' && flag(ctx, 'bundledOnly');
    const { found, total } = await pageAndTotal(
      page,
      (limit) => records.list(tenantId, { offset: page.offset, limit }, search),
      // No total is answered with bundledOnly: nothing to count.
      () => (bundledOnly ? Promise.resolve(0) : records.count(tenantId, search, LIST_COUNT_AT_MOST)),
    );
    const listed = answerPage(ctx, page, found, bundledOnly ? null : total).map(show);
    ctx.body = bundledOnly ? listed.filter((record) => record.inBundle) : listed;
  });

  /** A client's record read or written: its audit entry names the client (clientId filters find it). */
  const named = (ctx: AdminContext, record: StoredRecord): StoredRecord => {
    if (path === 'clients' && typeof record.clientId === 'string') auditFactsOf(ctx.state).clientId = record.clientId;
    return record;
  };

  const upsert = UPSERT_BY[path];
  if (upsert) {
    router.put(`/${path}/${upsert.route}`, async (ctx) => {
      const key = requiredQuery(ctx, upsert.field);
      const parsed = await body(ctx);
      const fields = isObject(parsed) ? { [upsert.field]: key, ...parsed } : parsed;
      if (isObject(fields) && fields[upsert.field] !== key)
        throw badRequest(`${upsert.field} in the body must match the query parameter`, { field: upsert.field });
      const tenantId = tenantOf(ctx, fields);
      const mode = isObject(fields) ? fields.mode : undefined;
      const existing = await records.findByUniqueField(tenantId, upsert.field, key, mode);
      if (!existing) await assertCreatable(ctx, tenantId, key);
      ctx.status = existing ? 200 : 201;
      ctx.body = show(
        named(
          ctx,
          existing ? await records.replace(tenantId, existing, fields) : await records.create(tenantId, fields),
        ),
      );
    });
  }

  // The checks of a create (schema, references, the engine's parse and bundle checks), nothing stored.
  router.post(`/${path}/validate`, async (ctx) => {
    const parsed = await body(ctx);
    await records.checkWithoutWriting(tenantOf(ctx, parsed), parsed);
    ctx.body = { valid: true };
  });

  historyRoutes(router, records, history, (ctx) => tenantOf(ctx), show);

  router.get(`/${path}/:key`, async (ctx) => {
    ctx.body = show(named(ctx, await records.get(tenantOf(ctx), ctx.params.key!)));
  });
  router.post(`/${path}`, async (ctx) => {
    const parsed = await body(ctx);
    const tenantId = tenantOf(ctx, parsed);
    await assertCreatable(ctx, tenantId, isObject(parsed) ? parsed[records.definition.pathKey] : undefined);
    ctx.status = 201;
    ctx.body = show(named(ctx, await records.create(tenantId, parsed)));
  });
  router.put(`/${path}/:key`, async (ctx) => {
    const parsed = await body(ctx);
    const tenantId = tenantOf(ctx, parsed);
    assertWritable(ctx, tenantId, ctx.params.key);
    const existing = named(ctx, await records.get(tenantId, ctx.params.key!));
    const replaced = await records.replace(tenantId, existing, parsed);
    await revokeAfterChange(store, path, tenantId, existing, replaced, options.logoutNotices);
    await options.changed?.({ kind: 'record', path, tenant: storeTenant(tenantId), before: existing, after: replaced });
    ctx.body = show(replaced);
  });
  router.delete(`/${path}/:key`, async (ctx) => {
    const tenantId = tenantOf(ctx);
    assertWritable(ctx, tenantId, ctx.params.key);
    const existing = named(ctx, await records.get(tenantId, ctx.params.key!));
    await records.remove(tenantId, existing);
    // After the record is gone, so that nothing can be issued for it once its tokens are swept.
    await revokeAfterChange(store, path, tenantId, existing, null, options.logoutNotices);
    await options.changed?.({ kind: 'record', path, tenant: storeTenant(tenantId), before: existing, after: null });
    ctx.status = 204;
  });
}

/**
 * The tenant an Admin API call is about: `tenantId` in the body, else the `tenantId` query
 * parameter, else X-Tenant-Id; none of them means the default (shared) tenant.
 */
function tenantOf(ctx: AdminContext, body?: unknown): string | null {
  const fromBody = isObject(body) ? body.tenantId : undefined;
  const fromQuery =
    typeof ctx.query.tenantId === 'string' && ctx.query.tenantId !== '' ? ctx.query.tenantId : undefined;
  const tenantId = fromBody ?? fromQuery ?? ctx.state.tenant?.id ?? null;
  if (tenantId !== null && !isTenantId(tenantId))
    throw badRequest('tenantId must be 1 to 64 letters, digits, ".", "-" or "_"', { field: 'tenantId' });
  assertTenantReached(ctx, tenantId);
  // The audit entry names the tenant the write was aimed at, which may come from body or query.
  if (ctx.state.audit) ctx.state.audit.tenantId = tenantId;
  return tenantId;
}

function flag(ctx: AdminContext, name: string): boolean {
  const value = ctx.query[name];
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  throw badRequest(`${name} must be true or false`, { field: name });
}

function requiredQuery(ctx: AdminContext, name: string): string {
  const value = ctx.query[name];
  if (typeof value !== 'string' || value === '')
    throw badRequest(`query parameter ${name} is required`, { field: name });
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export type { CollectionDefinition };
