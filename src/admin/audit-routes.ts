import type Router from '@koa/router';
import {
  ACTIVITY_MINUTES,
  AUDIT_COUNT_CAP,
  decodeAuditCursor,
  SORTABLE_FIELDS,
  type AuditCursor,
  type AuditEntry,
  type AuditLog,
  type Outcome,
} from '../audit/index.js';
import { badRequest, notFound } from '../http/errors.js';
import type { AdminContext } from './state.js';

export const MAX_PAGE_SIZE = 1000;

/**
 * Read-only access to the audit log: GET list (paged, filtered, sorted) and GET one. Like every
 * Admin collection, a call sees one tenant's entries: `tenantId` in the query, else X-Tenant-Id,
 * else the default tenant. `allTenants=true` is the operator's explicit way to see every tenant.
 */
export function auditLogRoutes(router: Router, audit: AuditLog, tenantOf: (ctx: AdminContext) => string | null): void {
  router.get('/audit-logs', async (ctx) => {
    const size = integer(ctx.query.size, 'size', 20, 1, MAX_PAGE_SIZE);
    const cursor = cursorOf(single(ctx.query.cursor));
    const page = integer(ctx.query.page, 'page', 0, 0, Number.MAX_SAFE_INTEGER);
    if (!cursor) assertNumberedPage(page, size);
    ctx.body = await audit.page({
      filter: {
        endpoint: single(ctx.query.endpoint),
        ...(allTenants(ctx) ? {} : { tenantId: tenantOf(ctx) }),
        clientId: single(ctx.query.clientId),
        outcome: outcomeOf(single(ctx.query.outcome)),
        // The console's own page loads (entries marked consoleRead) left out on request; never a write.
        ...(flag(ctx, 'hideConsoleReads') ? { consoleRead: null } : {}),
      },
      page,
      size,
      sort: sortOf(single(ctx.query.sort)),
      cursor,
      range: rangeOf(single(ctx.query.from), single(ctx.query.to)),
    });
  });
  // The console's overview: the decisions of the last hour (every worker and node), per minute, and the most denied.
  router.get('/activity', async (ctx) => {
    const minutes = integer(ctx.query.minutes, 'minutes', ACTIVITY_MINUTES, 1, ACTIVITY_MINUTES);
    ctx.body = await audit.activity.summary(tenantOf(ctx), minutes);
  });
  router.get('/audit-logs/:id', async (ctx) => {
    ctx.body = await auditEntryOf(ctx, audit, tenantOf);
  });
}

/** The entry named by the path's `:id`, if the call may see it (its tenant, or allTenants=true); else a 404. */
export async function auditEntryOf(
  ctx: AdminContext & { params: Record<string, string> },
  audit: AuditLog,
  tenantOf: (ctx: AdminContext) => string | null,
): Promise<AuditEntry> {
  const entry = /^\d{1,15}$/.test(ctx.params.id!) ? await audit.get(Number(ctx.params.id)) : null;
  if (!entry || !(allTenants(ctx) || entry.tenantId === tenantOf(ctx)))
    throw notFound(`no audit log entry ${JSON.stringify(ctx.params.id)} in this tenant`);
  return entry;
}

const OUTCOMES: readonly Outcome[] = ['allow', 'deny', 'error'];

/** `outcome`: the entries the caller got allowed, refused (deny) or failed on (error); absent: all. */
function outcomeOf(value: string | undefined): Outcome | undefined {
  if (value === undefined || value === '') return undefined;
  if (!OUTCOMES.includes(value as Outcome))
    throw badRequest(`outcome must be one of ${OUTCOMES.join(', ')}`, { field: 'outcome' });
  return value as Outcome;
}

function allTenants(ctx: AdminContext): boolean {
  return flag(ctx, 'allTenants');
}

function flag(ctx: AdminContext, name: string): boolean {
  const value = single(ctx.query[name]);
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  throw badRequest(`${name} must be true or false`, { field: name });
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function integer(
  value: string | string[] | undefined,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const text = single(value);
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max)
    throw badRequest(`${name} must be an integer from ${min} to ${max}`, { field: name });
  return Number(text);
}

/**
 * A page by number skips the entries before it one by one, so numbers reach as far as the count
 * does (AUDIT_COUNT_CAP); beyond, `nextCursor` goes on at the same cost at any depth.
 */
function assertNumberedPage(page: number, size: number): void {
  if ((page + 1) * size <= AUDIT_COUNT_CAP) return;
  throw badRequest(
    `(page + 1) × size must be at most ${AUDIT_COUNT_CAP}: page numbers reach the first ${AUDIT_COUNT_CAP} entries; beyond them, follow nextCursor (the cursor parameter)`,
    { field: 'page' },
  );
}

function sortOf(value: string | undefined): { field: string; direction: 'asc' | 'desc' } {
  if (!value) return { field: 'id', direction: 'desc' };
  const [field = '', direction = 'asc'] = value.split(',').map((part) => part.trim());
  if (!SORTABLE_FIELDS.includes(field) || !['asc', 'desc'].includes(direction.toLowerCase())) {
    throw badRequest(`sort must be "<field>,asc|desc" with field one of ${SORTABLE_FIELDS.join(', ')}`, {
      field: 'sort',
    });
  }
  return { field, direction: direction.toLowerCase() as 'asc' | 'desc' };
}

/** An ISO 8601 date, or a date and time with its offset (Z or ±hh:mm): never a local time, whose zone would be the server's. */
const INSTANT = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** `from` and `to`: the entries created in that range, both ends included (absent: unbounded on that side). */
function rangeOf(from: string | undefined, to: string | undefined): { from?: string; to?: string } | undefined {
  const instant = (value: string | undefined, name: string) => {
    if (value === undefined || value === '') return undefined;
    const time = INSTANT.test(value) ? Date.parse(value) : NaN;
    if (Number.isNaN(time))
      throw badRequest(`${name} must be an ISO 8601 date or date and time with its offset (2026-11-27T09:00:00Z)`, {
        field: name,
      });
    return new Date(time).toISOString();
  };
  const range = { from: instant(from, 'from'), to: instant(to, 'to') };
  if (range.from === undefined && range.to === undefined) return undefined;
  if (range.from !== undefined && range.to !== undefined && range.from > range.to)
    throw badRequest('from must not be after to', { field: 'from' });
  return range;
}

/** A page's `cursor`: a previous page's nextCursor, as it was handed out (400 otherwise). */
function cursorOf(value: string | undefined): AuditCursor | undefined {
  if (value === undefined || value === '') return undefined;
  const cursor = value.length <= MAX_CURSOR_LENGTH ? decodeAuditCursor(value) : null;
  if (!cursor) throw badRequest("cursor must be a page's nextCursor, as it was given", { field: 'cursor' });
  return cursor;
}

/** A cursor holds an id or a time and a count: far shorter than this. */
const MAX_CURSOR_LENGTH = 200;
