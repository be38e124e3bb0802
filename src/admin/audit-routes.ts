import Router from '@koa/router';
import { SORTABLE_FIELDS, type AuditLog } from '../audit/index.js';
import { badRequest, notFound } from '../http/errors.js';

const MAX_PAGE_SIZE = 1000;

/** Read-only access to the audit log: GET list (paged, filtered, sorted) and GET one. */
export function auditLogRoutes(router: Router, audit: AuditLog): void {
  router.get('/audit-logs', async (ctx) => {
    ctx.body = await audit.page({
      filter: {
        endpoint: single(ctx.query.endpoint),
        tenantId: single(ctx.query.tenantId),
        clientId: single(ctx.query.clientId),
      },
      page: integer(ctx.query.page, 'page', 0, 0, Number.MAX_SAFE_INTEGER),
      size: integer(ctx.query.size, 'size', 20, 1, MAX_PAGE_SIZE),
      sort: sortOf(single(ctx.query.sort)),
    });
  });
  router.get('/audit-logs/:id', async (ctx) => {
    const id = /^\d{1,15}$/.test(ctx.params.id) ? await audit.get(Number(ctx.params.id)) : null;
    if (!id) throw notFound(`no audit log entry ${JSON.stringify(ctx.params.id)}`);
    ctx.body = id;
  });
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function integer(value: string | string[] | undefined, name: string, fallback: number, min: number, max: number): number {
  const text = single(value);
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) throw badRequest(`${name} must be an integer from ${min} to ${max}`, { field: name });
  return Number(text);
}

function sortOf(value: string | undefined): { field: string; direction: 'asc' | 'desc' } {
  if (!value) return { field: 'id', direction: 'desc' };
  const [field, direction = 'asc'] = value.split(',').map((part) => part.trim());
  if (!SORTABLE_FIELDS.includes(field) || !['asc', 'desc'].includes(direction.toLowerCase())) {
    throw badRequest(`sort must be "<field>,asc|desc" with field one of ${SORTABLE_FIELDS.join(', ')}`, { field: 'sort' });
  }
  return { field, direction: direction.toLowerCase() as 'asc' | 'desc' };
}
