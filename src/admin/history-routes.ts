import type Router from '@koa/router';
import { badRequest, notFound } from '../http/errors.js';
import type { HistoryVersion, RecordHistory } from './history.js';
import { unifiedDiff } from './line-diff.js';
import type { RecordRepository, StoredRecord } from '../records/index.js';
import type { AdminContext } from './state.js';

/** The field a collection's diff shows line by line: a rule's source, a data entry's JSON. */
const TEXT_FIELD: Record<string, string> = { 'policy-rules': 'content', 'policy-data': 'payload' };

/**
 * A collection's history (src/admin/history.ts) over HTTP, under each record:
 * GET …/{id}/history (the versions, newest first, without their text), GET …/{id}/history/{number}
 * (one version, whole), GET …/{id}/history/{number}/diff (what differs from `to`, a version
 * number, or else the record as it is now) and POST …/{id}/history/{number}/rollback (the record
 * made that version again, checked like any replace: a rollback to a policy that cannot compile or
 * decide is a 400 too; a deleted record comes back under its id).
 */
export function historyRoutes(
  router: Router,
  records: RecordRepository,
  kept: RecordHistory | undefined,
  tenantOf: (ctx: AdminContext) => string | null,
  show: (record: StoredRecord) => Record<string, unknown>,
): void {
  if (!kept) return;
  const history = kept;
  const { definition } = records;
  const { path } = definition;
  const textField = TEXT_FIELD[path];
  if (textField === undefined) throw new Error(`collection ${path} keeps a history but names no text field`);

  /** The path's record id and its versions: a 404 when the record neither exists nor has any. */
  async function versionsOf(ctx: AdminContext & { params: Record<string, string> }) {
    const tenantId = tenantOf(ctx);
    const id = /^\d{1,15}$/.test(ctx.params.id!) ? Number(ctx.params.id) : null;
    const [current, versions] =
      id === null ? [null, []] : await Promise.all([records.find(tenantId, String(id)), history.list(tenantId, id)]);
    if (id === null || (!current && versions.length === 0))
      throw notFound(`no ${path} record ${JSON.stringify(ctx.params.id)}${tenantId ? ` in tenant ${tenantId}` : ''}`);
    return { tenantId, id, current, versions };
  }

  async function versionAt(ctx: AdminContext & { params: Record<string, string> }, number: string) {
    const found = await versionsOf(ctx);
    const version = found.versions.find((each) => String(each.number) === number);
    if (!version) throw notFound(`${path} record ${found.id} has no version ${JSON.stringify(number)}`);
    return { ...found, version };
  }

  router.get(`/${path}/:id/history`, async (ctx) => {
    const { versions } = await versionsOf(ctx);
    ctx.body = versions.map((version) => summary(version, textField));
  });

  router.get(`/${path}/:id/history/:number`, async (ctx) => {
    const { version } = await versionAt(ctx, ctx.params.number!);
    ctx.body = { ...summary(version, textField), record: version.record && show(version.record) };
  });

  router.get(`/${path}/:id/history/:number/diff`, async (ctx) => {
    const found = await versionAt(ctx, ctx.params.number!);
    const to = typeof ctx.query.to === 'string' && ctx.query.to !== '' ? ctx.query.to : null;
    const target = to === null ? null : found.versions.find((each) => String(each.number) === to);
    if (to !== null && !target)
      throw badRequest(`to must name a version of ${path} record ${found.id}`, { field: 'to' });
    const after = target ? target.record : found.current;
    ctx.body = {
      from: found.version.number,
      to: target ? target.number : 'current',
      ...differences(found.version.record, after, textField, {
        from: `version ${found.version.number}`,
        to: target ? `version ${target.number}` : 'current',
      }),
    };
  });

  router.post(`/${path}/:id/history/:number/rollback`, async (ctx) => {
    const { tenantId, id, current, version } = await versionAt(ctx, ctx.params.number!);
    if (!version.record)
      throw badRequest(`version ${version.number} of ${path} record ${id} is its deletion: DELETE the record instead`);
    const body = bodyOf(version.record, records);
    ctx.body = show(
      current
        ? await records.replace(tenantId, current, body, version.number)
        : await records.restore(tenantId, id, body, version.number),
    );
  });
}

/** A version in a list: what happened when, and the record without its (possibly large) text. */
function summary(version: HistoryVersion, textField: string): Record<string, unknown> {
  const { [textField]: _text, ...fields }: Record<string, unknown> = version.record ?? {};
  return {
    number: version.number,
    action: version.action,
    at: version.at,
    ...(version.rolledBackTo === undefined ? {} : { rolledBackTo: version.rolledBackTo }),
    deleted: version.record === null,
    ...(version.record ? { fields } : {}),
  };
}

/** The body that makes a record what a version holds: the fields its schema takes. */
function bodyOf(record: StoredRecord, records: RecordRepository): Record<string, unknown> {
  const properties = Object.keys((records.definition.schema as { properties: object }).properties);
  return Object.fromEntries(properties.filter((field) => field in record).map((field) => [field, record[field]]));
}

/** The fields that differ (but the text) and a unified diff of the text (JSON pretty-printed, so that lines mean something). */
function differences(
  before: StoredRecord | null,
  after: StoredRecord | null,
  textField: string,
  labels: { from: string; to: string },
): { changes: { field: string; from: unknown; to: unknown }[]; diff: string } {
  const ignored = new Set([textField, 'id', 'tenantId', 'createdAt', 'updatedAt']);
  const fields = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])].filter(
    (field) => !ignored.has(field),
  );
  const changes = fields
    .filter((field) => JSON.stringify(before?.[field]) !== JSON.stringify(after?.[field]))
    .map((field) => ({ field, from: before?.[field] ?? null, to: after?.[field] ?? null }));
  const name = String(after?.path ?? after?.dataKey ?? before?.path ?? before?.dataKey ?? textField);
  const text = (record: StoredRecord | null) => readable(record?.[textField], textField);
  const diff = unifiedDiff(text(before), text(after), {
    from: `${name} (${labels.from})`,
    to: `${name} (${labels.to})`,
  });
  return { changes, diff };
}

function readable(value: unknown, textField: string): string {
  if (typeof value !== 'string') return '';
  if (textField !== 'payload') return value;
  try {
    return `${JSON.stringify(JSON.parse(value), null, 2)}\n`;
  } catch {
    return value;
  }
}
