import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type Router from '@koa/router';
import { readJsonBody } from '../http/body.js';
import { HttpError, badRequest, notFound } from '../http/errors.js';
import { assertValid } from '../http/validation.js';
import {
  ConflictError,
  storageDigest,
  type Store,
  type StoredDoc,
  type TenantCollection,
  type TextSearch,
} from '../store/index.js';
import { answerPage, LIST_COUNT_AT_MOST, listPage, listSearch, pageAndTotal } from './paging.js';
import { ADMIN_ROLES, API_KEYS_SEGMENT, permissionsOf, type AdminRole } from './roles.js';
import { callerOf, type AdminContext, type AdminKeyIdentity } from './state.js';
import { ADMIN_API_KEYS_COLLECTION } from './collections.js';

/** Who made an Admin call, as audit entries and answers name it: never the key itself. */
export const BOOTSTRAP_KEY_NAME = 'bootstrap';

/** What `q` searches in GET /api-keys. */
export const API_KEY_SEARCH_FIELDS = ['name', 'description'];

/** Recognisable in a leaked file or a secret scanner's rules. */
const KEY_PREFIX = 'arbiter_admin_';

interface StoredKey extends StoredDoc {
  id: number;
  name: string;
  role: AdminRole;
  description?: string;
  keyDigest: string;
  /** ISO 8601: the key stops working at this instant. */
  expiresAt?: string;
  tenants?: string[];
  createdAt: string;
  createdBy: { id: number | null; name: string };
}

/** The body of POST /api-keys. */
export const API_KEY_INPUT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'role'],
  properties: {
    name: {
      type: 'string',
      // No space at either end: "bootstrap " would read as the bootstrap key in the console and the audit log.
      pattern: '^[A-Za-z0-9](?:[A-Za-z0-9._@ -]{0,62}[A-Za-z0-9._@-])?$',
      description: `1–64 letters, digits, ".", "_", "@", "-" or spaces (none at either end), unique; "${BOOTSTRAP_KEY_NAME}" is SERVICE_ADMIN_API_KEY's`,
    },
    role: { enum: [...ADMIN_ROLES] },
    description: { type: 'string', maxLength: 1024 },
    expiresAt: {
      type: 'string',
      format: 'date-time',
      description: 'when the key stops working (ISO 8601, in the future); absent: it works until revoked',
    },
    tenants: {
      type: 'array',
      minItems: 1,
      maxItems: 100,
      uniqueItems: true,
      items: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' },
      description:
        'the only tenants the key reaches (the default tenant is "_default"); such a key gets 403 for any other tenant and for every server-wide operation (keys, tenants, shared policy, impact, shadow)',
    },
  },
} as const;

export class AdminApiKeys {
  private readonly bootstrapDigest: Buffer;
  private readonly bootstrapLooksGenerated: boolean;

  constructor(
    private readonly store: Store,
    bootstrapKey: string,
  ) {
    this.bootstrapDigest = sha256(bootstrapKey);
    this.bootstrapLooksGenerated = bootstrapKey.startsWith(KEY_PREFIX);
  }

  /** Whether a presented value may be the bootstrap key: it is not shaped as a generated key, or the bootstrap key is too. */
  mayBeBootstrap(presented: string): boolean {
    return !presented.startsWith(KEY_PREFIX) || this.bootstrapLooksGenerated;
  }

  private collection(): TenantCollection<StoredKey> {
    return this.store.collection<StoredKey>(ADMIN_API_KEYS_COLLECTION);
  }

  /** Whose key this is, or null when it is no key (revoked, never issued, mistyped). */
  async identify(presented: string): Promise<AdminKeyIdentity | null> {
    // Digests compared, so that neither the bootstrap key nor its length leaks through timing.
    if (timingSafeEqual(sha256(presented), this.bootstrapDigest))
      return { id: null, name: BOOTSTRAP_KEY_NAME, role: 'admin' };
    const found = await this.collection().findOne({ keyDigest: storageDigest(presented) });
    if (!found || (found.expiresAt !== undefined && Date.parse(found.expiresAt) <= Date.now())) return null;
    return { id: found.id, name: found.name, role: found.role, ...(found.tenants ? { tenants: found.tenants } : {}) };
  }

  async create(body: unknown, by: AdminKeyIdentity): Promise<{ record: StoredKey; key: string }> {
    assertValid<{ name: string; role: AdminRole; description?: string; expiresAt?: string; tenants?: string[] }>(
      API_KEY_INPUT_SCHEMA,
      body,
    );
    if (body.name.toLowerCase() === BOOTSTRAP_KEY_NAME)
      throw badRequest(`name "${BOOTSTRAP_KEY_NAME}" is SERVICE_ADMIN_API_KEY's; choose another`, { field: 'name' });
    if (body.expiresAt !== undefined && Date.parse(body.expiresAt) <= Date.now())
      throw badRequest('expiresAt must be in the future', { field: 'expiresAt' });

    const key = `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
    const record: StoredKey = {
      id: await this.store.nextSequence(ADMIN_API_KEYS_COLLECTION.name),
      name: body.name,
      role: body.role,
      ...(body.description === undefined ? {} : { description: body.description }),
      keyDigest: storageDigest(key),
      ...(body.expiresAt === undefined ? {} : { expiresAt: new Date(body.expiresAt).toISOString() }),
      ...(body.tenants === undefined ? {} : { tenants: body.tenants }),
      createdAt: new Date().toISOString(),
      createdBy: { id: by.id, name: by.name },
    };
    try {
      await this.collection().insert(record);
    } catch (error) {
      if (error instanceof ConflictError && error.fields.includes('name'))
        throw new HttpError(409, 'conflict', `an Admin API key named ${JSON.stringify(body.name)} already exists`, {
          field: 'name',
        });
      throw error;
    }
    return { record, key };
  }

  /** One page of the keys (those whose name `search` finds, when given) by ascending id. */
  list(page: { offset: number; limit: number }, search?: TextSearch): Promise<StoredKey[]> {
    return this.collection().find(
      {},
      { sort: { field: 'id', direction: 'asc' }, skip: page.offset, limit: page.limit, search },
    );
  }

  count(search?: TextSearch, atMost?: number): Promise<number> {
    return this.collection().count({}, search, atMost);
  }

  async get(id: string): Promise<StoredKey> {
    const found = /^\d{1,15}$/.test(id) ? await this.collection().get(Number(id)) : null;
    if (!found) throw notFound(`no Admin API key ${JSON.stringify(id)}`);
    return found;
  }

  async revoke(id: string): Promise<void> {
    await this.collection().delete((await this.get(id)).id);
  }
}

/** A key as answers show it: everything but its digest. */
function present({ keyDigest: _digest, ...shown }: StoredKey): Record<string, unknown> {
  return shown;
}

/**
 * GET/POST /api-keys, GET /api-keys/current (the caller's own name, role and permissions: what
 * the console shows), GET and DELETE /api-keys/{id}. Keys are server-wide: their audit entries
 * name no tenant.
 */
export function apiKeyRoutes(router: Router, keys: AdminApiKeys, maxBodyBytes: number): void {
  const base = `/${API_KEYS_SEGMENT}`;
  const serverWide = (ctx: AdminContext) => {
    if (ctx.state.audit) ctx.state.audit.tenantId = null;
  };
  router.get(base, async (ctx) => {
    serverWide(ctx);
    const page = listPage(ctx);
    const search = listSearch(ctx, API_KEY_SEARCH_FIELDS);
    const { found, total } = await pageAndTotal(
      page,
      (limit) => keys.list({ offset: page.offset, limit }, search),
      () => keys.count(search, LIST_COUNT_AT_MOST),
    );
    ctx.body = answerPage(ctx, page, found, total).map(present);
  });
  router.post(base, async (ctx) => {
    serverWide(ctx);
    const body = await readJsonBody(ctx, maxBodyBytes);
    ctx.state.body = body;
    const { record, key } = await keys.create(body, callerOf(ctx));
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { ...present(record), key };
  });
  router.get(`${base}/current`, (ctx) => {
    serverWide(ctx);
    const caller = callerOf(ctx);
    ctx.body = { ...caller, bootstrap: caller.id === null && !caller.session, permissions: permissionsOf(caller.role) };
  });
  router.get(`${base}/:id`, async (ctx) => {
    serverWide(ctx);
    ctx.body = present(await keys.get(ctx.params.id!));
  });
  router.delete(`${base}/:id`, async (ctx) => {
    serverWide(ctx);
    await keys.revoke(ctx.params.id!);
    ctx.status = 204;
  });
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
