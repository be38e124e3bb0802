/**
 * Knowing a policy change before it is in force, over HTTP:
 * - POST /policy-impact: a proposed change (rule and data records to create, replace or delete,
 *   as the collections take them) checked as that write would be, then the tenant's recorded
 *   decisions replayed against the policy in force and against the bundle the change makes;
 * - /policy-shadow: the shadow records' candidate revision, what this node's live decisions would
 *   have been under it (GET …/differences), and promoting it (one call makes it live) or
 *   discarding it.
 */
import type Router from '@koa/router';
import { withinSkipBound, type AuditLog, type RecordedDecisionCursor } from '../audit/index.js';
import type { CollectionDefinition } from '../catalog/index.js';
import { readJsonBody } from '../http/body.js';
import { badRequest, HttpError, notFound } from '../http/errors.js';
import { assertValid } from '../http/validation.js';
import {
  CHANGE_KINDS,
  DECISION_POINTS,
  NO_CLIENT,
  SandboxLimitError,
  type PolicyLab,
  type PolicySnapshot,
  type RecordChange,
  type TrialInput,
} from '../policy/index.js';
import type { RecordRepository, StoredRecord } from '../records/index.js';
import { storeTenant } from '../tenancy/index.js';
import type { AdminContext } from './state.js';

/** The collections a change may touch, by the name a change gives them. */
export const POLICY_COLLECTIONS = { 'policy-rules': 'rules', 'policy-data': 'data' } as const;
type PolicyCollection = keyof typeof POLICY_COLLECTIONS;

/** The most recorded decisions one analysis replays. */
export const MAX_IMPACT_LIMIT = 100_000;
export const DEFAULT_IMPACT_LIMIT = 1000;

/** One change of POST /policy-impact (also the OpenAPI document's PolicyChange). */
export const POLICY_CHANGE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['collection', 'op'],
  properties: {
    collection: { enum: Object.keys(POLICY_COLLECTIONS) },
    op: { enum: ['create', 'replace', 'delete'] },
    id: {
      type: 'integer',
      minimum: 1,
      description:
        'the record a replace or delete is about; without it, the live record of record.path (record.dataKey)',
    },
    record: {
      type: 'object',
      description:
        "the record exactly as POST (create) or PUT (replace) of the collection takes it; a delete needs only its path (dataKey), or none with an id. Only shared records (no tenantId) make the policy bundle, and a change is tried as live: no mode 'shadow'",
    },
  },
};

/** The body of POST /policy-impact (also the OpenAPI document's PolicyImpactRequest). */
export const POLICY_IMPACT_REQUEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['changes'],
  properties: {
    changes: { type: 'array', minItems: 1, maxItems: 100, items: POLICY_CHANGE_SCHEMA },
    limit: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_IMPACT_LIMIT,
      default: DEFAULT_IMPACT_LIMIT,
      description: "how many of the tenant's most recent recorded decisions to replay",
    },
    cursor: {
      type: 'string',
      minLength: 1,
      maxLength: 400,
      description:
        "a previous answer's nextCursor (with the same changes and filter): replays the next `limit` decisions, older than those, so that any number of decisions can be replayed in calls of at most 100,000",
    },
    filter: {
      type: 'object',
      additionalProperties: false,
      properties: {
        point: { enum: [...DECISION_POINTS] },
        clientId: { type: 'string', minLength: 1, maxLength: 2048 },
        from: { type: 'string', format: 'date-time', description: 'decisions recorded at or after this instant' },
        to: { type: 'string', format: 'date-time', description: 'decisions recorded before this instant' },
      },
    },
  },
};

/** The body of POST /policy-shadow/promote and …/discard (may be left out): the candidate revision the operator reviewed. */
export const SHADOW_ACTION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    candidateRevision: {
      type: 'string',
      minLength: 1,
      maxLength: 128,
      description:
        'the candidate revision reviewed (GET /policy-shadow): when the shadows have changed since, 409 and nothing is done',
    },
  },
};

const kinds = { enum: [...CHANGE_KINDS] };
const nullableString = { type: ['string', 'null'] };
const count = { type: 'integer', minimum: 0 };

/** The schemas of the answers (the OpenAPI document's, by name). */
export const POLICY_LAB_SCHEMAS = {
  ComparedDecision: {
    type: 'object',
    required: ['allow'],
    description: 'the fields of a decision that are compared, and why no engine decided (engineError, shown only)',
    properties: {
      allow: { type: 'boolean' },
      scopes: { type: 'array', items: { type: 'string' } },
      authorization_details: { type: 'array', items: { type: 'object' } },
      obligations: { type: 'object' },
      extensions: { type: 'object' },
      jit_single_use: { type: 'boolean' },
      error: { type: 'string' },
      error_description: { type: 'string' },
      engineError: { type: 'string' },
    },
  },
  ChangedDecision: {
    type: 'object',
    required: ['auditId', 'time', 'point', 'clientId', 'subject', 'kind', 'before', 'after'],
    properties: {
      auditId: { type: 'integer', description: 'the audit entry (GET /audit-logs/{id}, POST /audit-logs/{id}/replay)' },
      index: { ...count, description: 'which of the entry’s decisions, when it holds several (AuthZEN batch, UMA)' },
      time: { type: 'string', format: 'date-time' },
      point: { enum: [...DECISION_POINTS] },
      clientId: nullableString,
      subject: nullableString,
      kind: kinds,
      before: { $ref: '#/components/schemas/ComparedDecision' },
      after: { $ref: '#/components/schemas/ComparedDecision' },
    },
  },
  ChangeCounts: {
    type: 'object',
    required: ['replayed', 'changed', ...CHANGE_KINDS],
    properties: Object.fromEntries(['replayed', 'changed', ...CHANGE_KINDS].map((name) => [name, count])),
  },
  ChangeSummary: {
    type: 'object',
    required: ['byPoint', 'byClient'],
    properties: {
      byPoint: { type: 'object', additionalProperties: { $ref: '#/components/schemas/ChangeCounts' } },
      byClient: {
        type: 'object',
        description: `by client_id; ${NO_CLIENT} for decisions without a client`,
        additionalProperties: { $ref: '#/components/schemas/ChangeCounts' },
      },
    },
  },
  PolicyImpact: {
    type: 'object',
    required: ['replayed', 'changed', 'summary', 'skipped', 'coverage', 'revisions', 'ms'],
    properties: {
      replayed: {
        ...count,
        description:
          'recorded decisions replayed: first the latest of every (client, point) the filter covers, then the newest others',
      },
      changed: { type: 'array', items: { $ref: '#/components/schemas/ChangedDecision' }, description: 'newest first' },
      summary: { $ref: '#/components/schemas/ChangeSummary' },
      skipped: { ...count, description: 'recorded inputs that no longer fit their point’s input schema' },
      coverage: {
        type: 'object',
        required: ['clients', 'points'],
        properties: {
          clients: { ...count, description: 'distinct clients whose decisions were replayed' },
          points: { ...count, description: 'distinct decision points replayed' },
        },
      },
      revisions: {
        type: 'object',
        required: ['live', 'candidate'],
        properties: { live: { type: 'string' }, candidate: { type: 'string' } },
      },
      signals: {
        type: 'object',
        required: ['liveTokens', 'receivers'],
        description:
          'what applying the change would signal (docs/signals.md#events-from-policy): live tokens of the tenant it refuses or narrows, and the Shared Signals streams told',
        properties: { liveTokens: count, receivers: count },
      },
      ms: { ...count, description: 'how long the check and the replay took' },
      nextCursor: {
        ...nullableString,
        description:
          'the limit was reached before the oldest matching decision: pass as `cursor` to replay the next ones; null when every matching decision was replayed',
      },
    },
  },
  ShadowStatus: {
    type: 'object',
    required: ['active', 'candidateRevision', 'liveRevision', 'since', 'evaluated', 'summary', 'dropped', 'records'],
    properties: {
      active: { type: 'boolean', description: 'there are shadow records' },
      candidateRevision: nullableString,
      liveRevision: nullableString,
      since: { ...nullableString, description: 'when a worker or node first saw this candidate' },
      evaluated: {
        ...count,
        description: 'live decisions of the tenant every worker and node evaluated against the candidate',
      },
      summary: { $ref: '#/components/schemas/ChangeSummary' },
      dropped: {
        ...count,
        description: 'live decisions a worker or node could not evaluate (POLICY_SHADOW_QUEUE was full)',
      },
      records: {
        type: 'array',
        items: {
          type: 'object',
          required: ['collection', 'id'],
          properties: {
            collection: { enum: Object.keys(POLICY_COLLECTIONS) },
            id: { type: 'integer' },
            path: { type: 'string' },
            dataKey: { type: 'string' },
            enabled: { type: 'boolean' },
          },
        },
      },
    },
  },
  ShadowDifferences: {
    type: 'object',
    required: ['active', 'candidateRevision', 'liveRevision', 'since', 'evaluated', 'summary', 'differences'],
    properties: {
      active: { type: 'boolean' },
      candidateRevision: nullableString,
      liveRevision: nullableString,
      since: nullableString,
      evaluated: count,
      summary: { $ref: '#/components/schemas/ChangeSummary' },
      differences: {
        type: 'array',
        description: 'newest first',
        items: {
          allOf: [
            { $ref: '#/components/schemas/ChangedDecision' },
            { type: 'object', required: ['tenantId'], properties: { tenantId: nullableString } },
          ],
        },
      },
    },
  },
  ShadowPromotion: {
    type: 'object',
    required: ['promoted', 'revision'],
    properties: {
      promoted: {
        type: 'array',
        items: {
          type: 'object',
          required: ['collection', 'id', 'action'],
          properties: {
            collection: { enum: Object.keys(POLICY_COLLECTIONS) },
            path: { type: 'string' },
            dataKey: { type: 'string' },
            id: { type: ['integer', 'null'], description: 'the live record (null: deleted)' },
            action: { enum: ['created', 'replaced', 'deleted'] },
          },
        },
      },
      revision: { type: 'string', description: 'the bundle revision the store holds now' },
    },
  },
  ShadowDiscard: { type: 'object', required: ['discarded'], properties: { discarded: count } },
};

interface PolicyChangeBody {
  collection: PolicyCollection;
  op: 'create' | 'replace' | 'delete';
  id?: number;
  record?: Record<string, unknown>;
}

interface PolicyImpactBody {
  changes: PolicyChangeBody[];
  limit?: number;
  filter?: { point?: string; clientId?: string; from?: string; to?: string };
  cursor?: string;
}

export interface PolicyLabRouteOptions {
  lab: PolicyLab;
  audit: AuditLog;
  maxBodyBytes: number;
  tenantOf: (ctx: AdminContext) => string | null;
  /** Per policy collection: its records checked as a write checks each file (parse check), not yet the whole bundle. */
  checkedRecords: Record<PolicyCollection, RecordRepository>;
  /** Per policy collection: its records written without the checks (a promotion checks the whole candidate first), history kept. */
  uncheckedRecords: Record<PolicyCollection, RecordRepository>;
  /** The inputs recently recorded that a change is tried on (as every write is). */
  recordedInputs: () => Promise<TrialInput[]>;
  /** What applying the candidate would signal to Shared Signals receivers (src/signals), absent: not told. */
  signalPreview?: (tenant: string, candidate: PolicySnapshot) => Promise<{ liveTokens: number; receivers: number }>;
}

/** The field a refusal of the whole bundle names, as a write of that collection names it. */
const CHECKED_FIELD: Record<PolicyCollection, string> = { 'policy-rules': 'content', 'policy-data': 'payload' };

/** A policy collection's key (a rule's path, a data entry's dataKey): its one unique field. */
function keyFieldOf(definition: CollectionDefinition): string {
  const [field] = definition.uniqueFields;
  if (field === undefined) throw new Error(`collection ${definition.path} has no unique field to key it`);
  return field;
}

export function policyLabRoutes(router: Router, options: PolicyLabRouteOptions): void {
  router.post('/policy-impact', async (ctx) => {
    const body = await readJsonBody(ctx, options.maxBodyBytes);
    assertValid<PolicyImpactBody>(POLICY_IMPACT_REQUEST_SCHEMA, body);
    const tenantId = options.tenantOf(ctx);
    const range = timeRange(body.filter);
    const started = performance.now();
    const changes: RecordChange[] = [];
    for (const [index, change] of body.changes.entries()) changes.push(await atIndex(index, () => resolved(change)));
    const tried = await options.lab.tryChanges(changes, options.recordedInputs);
    if ('problem' in tried)
      // The schema asks for at least one change; the bundle is refused as the last one left it.
      throw badRequest(tried.problem, { field: CHECKED_FIELD[body.changes.at(-1)!.collection] });
    const { live } = await options.lab.layers();
    const query = {
      tenantId,
      point: body.filter?.point,
      clientId: body.filter?.clientId,
      ...range,
      limit: body.limit ?? DEFAULT_IMPACT_LIMIT,
    };
    // The latest decision of every (client, point) first, then the newest others; a resumed call goes on with the older others.
    const pages = options.audit.stratifiedDecisions(
      query,
      body.cursor === undefined ? undefined : impactCursorOf(body.cursor),
    );
    const result = await options.lab.impact(live, tried.snapshot, pages).catch(unprocessableAtLimit);
    const signals = await options.signalPreview?.(storeTenant(tenantId), tried.snapshot);
    ctx.body = {
      replayed: result.replayed,
      changed: result.changed,
      summary: result.summary,
      skipped: result.skipped,
      coverage: {
        clients: Object.keys(result.summary.byClient).length,
        points: Object.keys(result.summary.byPoint).length,
      },
      revisions: { live: live.revision, candidate: tried.snapshot.revision },
      ...(signals ? { signals } : {}),
      ms: Math.round(performance.now() - started),
      nextCursor: pages.stoppedAt && Buffer.from(JSON.stringify(pages.stoppedAt)).toString('base64url'),
    };
  });

  router.get('/policy-shadow', async (ctx) => {
    const tenantId = options.tenantOf(ctx);
    const [status, { shadow }] = await Promise.all([options.lab.shadow.current(), options.lab.layers()]);
    // Every worker's and node's counts of the tenant's decisions only: another tenant's traffic is not shown, not even counted.
    const summary = await options.lab.shadow.summary(tenantId);
    ctx.body = {
      active: status.active,
      candidateRevision: status.candidateRevision,
      liveRevision: status.liveRevision,
      since: status.since,
      ...summary,
      dropped: status.dropped,
      records: [
        ...shadow.rules.map((rule) => ({
          collection: 'policy-rules',
          id: rule.id,
          path: rule.path,
          enabled: rule.enabled !== false,
        })),
        ...shadow.data.map((entry) => ({ collection: 'policy-data', id: entry.id, dataKey: entry.dataKey })),
      ],
    };
  });

  router.get('/policy-shadow/differences', async (ctx) => {
    const tenantId = options.tenantOf(ctx);
    const point = optionalQuery(ctx, 'point');
    if (point !== undefined && !DECISION_POINTS.includes(point as never))
      throw badRequest(`point must be one of ${DECISION_POINTS.join(', ')}`, { field: 'point' });
    const limit = integerQuery(ctx, 'limit', 100, 1, 1000);
    const status = await options.lab.shadow.current();
    const [differences, summary] = await Promise.all([
      options.lab.shadow.differences(tenantId, { point, clientId: optionalQuery(ctx, 'clientId'), limit }),
      options.lab.shadow.summary(tenantId),
    ]);
    ctx.body = {
      active: status.active,
      candidateRevision: status.candidateRevision,
      liveRevision: status.liveRevision,
      since: status.since,
      ...summary,
      differences,
    };
  });

  router.post('/policy-shadow/promote', async (ctx) => {
    await reviewedCandidate(ctx);
    ctx.body = await promote(options);
  });

  router.post('/policy-shadow/discard', async (ctx) => {
    await reviewedCandidate(ctx);
    const { shadow } = await options.lab.layers();
    const all = [...shadowRecords('policy-rules', shadow.rules), ...shadowRecords('policy-data', shadow.data)];
    for (const { collection, id } of all) {
      const records = options.uncheckedRecords[collection];
      const existing = await records.find(null, String(id));
      if (existing) await records.remove(null, existing);
    }
    await options.lab.shadow.forget();
    ctx.body = { discarded: all.length };
  });

  /** The body's candidateRevision, when given, is the one the shadows make now: else 409, and nothing is done. */
  async function reviewedCandidate(ctx: AdminContext): Promise<void> {
    const body = hasBody(ctx) ? await readJsonBody(ctx, options.maxBodyBytes) : {};
    assertValid<{ candidateRevision?: string }>(SHADOW_ACTION_SCHEMA, body);
    if (body.candidateRevision === undefined) return;
    const { candidateRevision } = await options.lab.shadow.current();
    if (candidateRevision !== body.candidateRevision)
      throw new HttpError(
        409,
        'conflict',
        `the shadow records have changed since: the candidate revision is ${candidateRevision ?? 'none (no shadow records)'}`,
        { field: 'candidateRevision' },
      );
  }

  /** One change of the request as the write it proposes: its record checked as that write would check it. */
  async function resolved(change: PolicyChangeBody): Promise<RecordChange> {
    const records = options.checkedRecords[change.collection];
    const { definition } = records;
    const keyField = keyFieldOf(definition);
    const record = change.record;
    if (record?.tenantId !== undefined && record.tenantId !== null)
      throw badRequest(
        "only shared records (without a tenantId) make the policy bundle: a tenant's record changes no decision",
        { field: 'tenantId' },
      );
    if (record?.mode === 'shadow')
      throw badRequest('a change is tried as if it were live: leave mode out (shadows have /policy-shadow)', {
        field: 'mode',
      });
    const existing = change.op === 'create' ? undefined : await addressed(records, change, keyField);
    const collection = POLICY_COLLECTIONS[change.collection];
    if (change.op === 'delete') return { collection, record: null, tenantId: null, replacesId: existing!.id };
    if (!record) throw badRequest(`a ${change.op} needs the record`, { field: 'record' });
    const key = record[keyField];
    if (change.op === 'create' && typeof key === 'string' && (await records.findByUniqueField(null, keyField, key)))
      throw new HttpError(
        409,
        'conflict',
        `a ${definition.path} record with this ${keyField} already exists in this tenant`,
        {
          field: keyField,
        },
      );
    const fields = await records.fieldsFor(null, record, existing);
    return { collection, record: fields, tenantId: null, replacesId: existing?.id } as RecordChange;
  }
}

/**
 * A replay stopped by a limit of the policy sandbox (a candidate too slow or too large on the
 * recorded decisions) is a 422 naming the limit; no thread free is a 503 on its own (Retry-After).
 */
function unprocessableAtLimit(error: unknown): never {
  if (error instanceof SandboxLimitError)
    throw new HttpError(
      422,
      'invalid_request',
      `the recorded decisions could not be replayed: ${error.message}; make the candidate cheaper or replay fewer decisions (limit)`,
      { limit: error.limit },
    );
  throw error;
}

/** The live record a replace or delete is about: by `id`, else by the record's path (data key). */
async function addressed(records: RecordRepository, change: PolicyChangeBody, keyField: string): Promise<StoredRecord> {
  const key = change.record?.[keyField];
  if (change.id === undefined && typeof key !== 'string')
    throw badRequest(`a ${change.op} names its record: id, or record.${keyField}`, { field: 'id' });
  const existing =
    change.id !== undefined
      ? await records.find(null, String(change.id))
      : await records.findByUniqueField(null, keyField, key as string);
  const name = change.id !== undefined ? String(change.id) : JSON.stringify(key);
  if (!existing) throw notFound(`no ${records.definition.path} record ${name}`);
  if (existing.mode === 'shadow')
    throw badRequest(
      `${records.definition.path} record ${name} is a shadow, not in force: promote or discard it at /policy-shadow`,
      {
        field: 'id',
      },
    );
  return existing;
}

/** A refusal of one change says which (`change`: its index), with the field and message the write would give. */
async function atIndex<T>(index: number, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof HttpError)
      throw new HttpError(error.status, error.code, error.message, { ...error.details, change: index });
    throw error;
  }
}

/**
 * Makes the shadow records live in one call: the candidate revision is checked as one write (it
 * must compile and decide, as every write must), then each shadow replaces the live record of its
 * path (or data key), or becomes one, and leaves the shadows; a disabled shadow rule deletes the
 * live rule of its path. Each write keeps its version in the history.
 */
async function promote(options: PolicyLabRouteOptions) {
  const { live, shadow } = await options.lab.layers();
  const shadows = [...shadowRecords('policy-rules', shadow.rules), ...shadowRecords('policy-data', shadow.data)];
  if (shadows.length === 0) return { promoted: [], revision: live.revision };
  const liveRecords = new Map<string, StoredRecord | null>();
  const changes: RecordChange[] = [];
  for (const each of shadows) {
    const records = options.uncheckedRecords[each.collection];
    const keyField = keyFieldOf(records.definition);
    const current = await records.findByUniqueField(null, keyField, each.key);
    liveRecords.set(`${each.collection} ${each.key}`, current);
    const removal = each.collection === 'policy-rules' && each.record.enabled === false;
    changes.push({
      collection: POLICY_COLLECTIONS[each.collection],
      record: removal ? null : (liveFields(records.definition, each.record) as never),
      tenantId: null,
      replacesId: current?.id,
    } as RecordChange);
  }
  const tried = await options.lab.tryChanges(
    changes.filter((change) => change.record !== null || change.replacesId !== undefined),
    options.recordedInputs,
  );
  if ('problem' in tried) throw badRequest(tried.problem, { field: 'shadow' });
  const promoted = [];
  for (const each of shadows) {
    const records = options.uncheckedRecords[each.collection];
    const current = liveRecords.get(`${each.collection} ${each.key}`) ?? null;
    const fields = liveFields(records.definition, each.record);
    const removal = each.collection === 'policy-rules' && each.record.enabled === false;
    let live: StoredRecord | null = null;
    if (removal) {
      if (current) await records.remove(null, current);
    } else live = current ? await records.replace(null, current, fields) : await records.create(null, fields);
    const stored = await records.find(null, String(each.id));
    if (stored) await records.remove(null, stored);
    promoted.push({
      collection: each.collection,
      [keyFieldOf(records.definition)]: each.key,
      id: live?.id ?? null,
      action: removal ? 'deleted' : current ? 'replaced' : 'created',
    });
  }
  await options.lab.shadow.forget();
  return { promoted, revision: tried.snapshot.revision };
}

interface ShadowRecord {
  collection: PolicyCollection;
  id: number;
  key: string;
  record: Record<string, unknown>;
}

function shadowRecords(
  collection: PolicyCollection,
  records: ({ id: number; path?: string; dataKey?: string } & Record<string, unknown>)[],
): ShadowRecord[] {
  return records.map((record) => ({
    collection,
    id: record.id,
    key: (collection === 'policy-rules' ? record.path : record.dataKey) as string,
    record,
  }));
}

/** A shadow's fields as the live record's body: what the collection's schema takes, without the mode. */
function liveFields(definition: CollectionDefinition, record: Record<string, unknown>): Record<string, unknown> {
  const properties = Object.keys((definition.schema as { properties: object }).properties);
  return Object.fromEntries(
    properties
      .filter((field) => field in record && field !== 'mode' && field !== 'tenantId')
      .map((field) => [field, record[field]]),
  );
}

/** A cursor a previous answer gave (base64url of the position's JSON); 400 otherwise. */
function impactCursorOf(text: string): RecordedDecisionCursor {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    value = null;
  }
  const { at, seen, taken } = (value ?? {}) as Partial<RecordedDecisionCursor>;
  if (
    typeof at !== 'string' ||
    Number.isNaN(Date.parse(at)) ||
    // As the audit log's cursors: `seen` entries are skipped one by one (decodeAuditCursor).
    !withinSkipBound(seen) ||
    !Number.isSafeInteger(taken) ||
    taken! < 0
  )
    throw badRequest("cursor must be a previous answer's nextCursor, as it was given", { field: 'cursor' });
  return { at, seen: seen!, taken: taken! };
}

/** The filter's time range as createdAt compares: ISO 8601 in UTC; `from` must come before `to`. */
function timeRange(filter: PolicyImpactBody['filter']): { from?: string; to?: string } {
  const from = filter?.from === undefined ? undefined : new Date(filter.from).toISOString();
  const to = filter?.to === undefined ? undefined : new Date(filter.to).toISOString();
  if (from !== undefined && to !== undefined && from >= to)
    throw badRequest('filter.from must be before filter.to', { field: 'filter.from' });
  return { ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }) };
}

/** A POST whose body may be left out (no Content-Type, nothing sent). */
function hasBody(ctx: AdminContext): boolean {
  return (
    ctx.get('content-type') !== '' || Number(ctx.get('content-length') || 0) > 0 || ctx.get('transfer-encoding') !== ''
  );
}

function optionalQuery(ctx: AdminContext, name: string): string | undefined {
  const value = ctx.query[name];
  if (Array.isArray(value)) throw badRequest(`${name} must be given once`, { field: name });
  return value === undefined || value === '' ? undefined : value;
}

function integerQuery(ctx: AdminContext, name: string, fallback: number, min: number, max: number): number {
  const text = optionalQuery(ctx, name);
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max)
    throw badRequest(`${name} must be an integer from ${min} to ${max}`, { field: name });
  return Number(text);
}
