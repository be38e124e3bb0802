import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import { LRUCache } from 'lru-cache';
import { recordDecision } from '../audit/index.js';
import { readJsonBody } from '../http/body.js';
import { badRequest, HttpError, notFound } from '../http/errors.js';
import { routedApi, type RoutedApi } from '../http/router.js';
import { assertValid } from '../http/validation.js';
import { enforceHttp, requestInput, type DelegationInput, type DenyRules } from '../policy/index.js';
import { findResource, resourceInput, type ApiContext, type ApiState, type UmaDeps } from '../uma/index.js';
import {
  DELEGATION_KEPT_MS,
  dateEndedDelegations,
  delegationGrant,
  delegations,
  isOwner,
  keptUntil,
  ownedBy,
  presentDelegation,
  type DelegationOwner,
  type DelegationRecord,
} from './records.js';
import { DELEGATION_REQUEST, DELEGATION_UPDATE, type DelegationRequest } from './schemas.js';
import { requestIssuer } from '../tenancy/index.js';

export const DELEGATION_PATH = '/delegation';

/** What the UMA protection API is given, less the ticket lifetime. */
export interface DelegationDeps extends Omit<UmaDeps, 'ticketSeconds' | 'resourceDeleted' | 'resourcesPerOwner'> {
  /** DELEGATIONS_PER_OWNER. */
  delegationsPerOwner: number;
}

/**
 * The delegation store (spec: Delegation): a resource owner gives a user or a client some of a
 * UMA resource's scopes until a date, changes that date, and revokes (softly). Every change is
 * the `delegation` decision's to allow; reads show the caller's own delegations only.
 */
export function delegationRouter(deps: DelegationDeps): RoutedApi<ApiState> {
  const router = new Router<ApiState>({ sensitive: true, strict: true });
  const ownerOf = async (ctx: ApiContext): Promise<DelegationOwner> => {
    const caller = await deps.callers(ctx, { scope: 'delegation_management', audience: 'urn:as:delegation' });
    return { sub: caller.sub, clientId: caller.clientId };
  };
  const owned = async (ctx: ApiContext, owner: DelegationOwner): Promise<DelegationRecord> => {
    const record = await delegations(deps.store, ctx.state.tenant.name).get(String(ctx.params.delegationId));
    if (!record || !isOwner(record, owner)) throw notFound('no delegation with this id is owned by the caller');
    return record;
  };

  router.post(DELEGATION_PATH, async (ctx) => {
    const owner = await ownerOf(ctx);
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<DelegationRequest>(DELEGATION_REQUEST, body);
    const tenant = ctx.state.tenant.name;
    const request = await normalized(deps, tenant, body);
    const decision = await decide(ctx, deps, owner, 'create', request);
    const granted = request.scopes.filter((scope) => decision.scopes?.includes(scope));
    if (granted.length === 0)
      throw new HttpError(400, 'invalid_scope', 'the policy allows none of the requested scopes to be delegated', {
        field: 'scopes',
      });
    await assertRoomFor(deps, tenant, owner);
    const validity = { revokedAt: null, validUntil: request.expires_at };
    const record = await delegations(deps.store, tenant).insert({
      ...withKeptUntil(validity),
      id: randomUUID(),
      ownerSub: owner.sub,
      ownerClientId: owner.clientId,
      granteeType: request.grantee_type,
      granteeSubjectId: request.grantee_subject_id,
      granteeClientId: request.grantee_client_id,
      resourceId: request.resource_id,
      scopes: granted,
      createdAt: new Date().toISOString(),
    });
    ctx.status = 201;
    ctx.set('Location', `${requestIssuer(deps.issuer, ctx.state.tenant)}${DELEGATION_PATH}/${record.id}`);
    ctx.body = { delegation_id: record.id };
  });

  router.get(DELEGATION_PATH, async (ctx) => {
    const owner = await ownerOf(ctx);
    const records = await delegations(deps.store, ctx.state.tenant.name).find(ownedBy(owner), {
      sort: { field: 'createdAt', direction: 'asc' },
    });
    ctx.body = records.map(presentDelegation);
  });

  router.get(`${DELEGATION_PATH}/:delegationId`, async (ctx) => {
    ctx.body = presentDelegation(await owned(ctx, await ownerOf(ctx)));
  });

  router.put(`${DELEGATION_PATH}/:delegationId`, async (ctx) => {
    const owner = await ownerOf(ctx);
    const record = await owned(ctx, owner);
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<Partial<DelegationRequest> & { expires_at: string | null }>(DELEGATION_UPDATE, body);
    if (record.revokedAt) throw badRequest('a revoked delegation cannot be changed');
    assertOnlyExpiryChanges(record, body);
    const expiresAt = instant(body.expires_at);
    await decide(ctx, deps, owner, 'update', { ...requestOf(record), expires_at: expiresAt });
    // Only while unrevoked: a revocation between the read above and this write stands.
    const updated = await delegations(deps.store, ctx.state.tenant.name).update(
      record.id,
      { validUntil: expiresAt, expiresAt: keptUntil({ revokedAt: null, validUntil: expiresAt }) ?? null },
      { revokedAt: null },
    );
    if (!updated) throw badRequest('a revoked delegation cannot be changed');
    ctx.body = presentDelegation(updated);
  });

  router.delete(`${DELEGATION_PATH}/:delegationId`, async (ctx) => {
    const owner = await ownerOf(ctx);
    const record = await owned(ctx, owner);
    if (!record.revokedAt) {
      await decide(ctx, deps, owner, 'revoke', requestOf(record));
      const ended = withKeptUntil({ revokedAt: new Date().toISOString(), validUntil: record.validUntil });
      await delegations(deps.store, ctx.state.tenant.name).update(record.id, ended, { revokedAt: null });
    }
    ctx.status = 204;
  });

  return routedApi(router);
}

const DAY_MS = 24 * 3600 * 1000;

/** A delegation's `revokedAt` and `validUntil` with the store's `expiresAt` they give (keptUntil). */
function withKeptUntil(validity: Pick<DelegationRecord, 'revokedAt' | 'validUntil'>): Partial<DelegationRecord> & {
  revokedAt: string | null;
  validUntil: string | null;
} {
  const expiresAt = keptUntil(validity);
  return expiresAt === undefined ? validity : { ...validity, expiresAt };
}

/**
 * One more delegation of this owner stays within DELEGATIONS_PER_OWNER, else 409: each is a
 * stored row, and one caller could otherwise store them without end (found 2026-11-29: nothing
 * bounded them). Revoked and expired ones count until they are deleted (DELEGATION_KEPT_MS).
 */
async function assertRoomFor(deps: DelegationDeps, tenant: string, owner: DelegationOwner): Promise<void> {
  const cap = deps.delegationsPerOwner;
  const count = () => delegations(deps.store, tenant).count(ownedBy(owner), undefined, cap);
  let held = await count();
  if (held >= cap && firstTimeAtCap(tenant, owner) && (await dateEndedDelegations(deps.store, tenant, owner, cap)) > 0)
    held = await count();
  if (held >= cap)
    throw new HttpError(
      409,
      'conflict',
      `an owner keeps at most ${deps.delegationsPerOwner} delegations, revoked and expired ones for ${DELEGATION_KEPT_MS / DAY_MS} days after`,
    );
}

/** Owners whose ended delegations were dated in this process (dateEndedDelegations), the least recent forgotten first. */
const datedOwners = new LRUCache<string, true>({ max: 10_000 });

/** Whether this owner reaches its bound for the first time in this process: a pass of dateEndedDelegations is then worth its read. */
function firstTimeAtCap(tenant: string, owner: DelegationOwner): boolean {
  const key = JSON.stringify([tenant, owner.sub, owner.sub ? null : owner.clientId]);
  if (datedOwners.has(key)) return false;
  datedOwners.set(key, true);
  return true;
}

type NormalizedRequest = Omit<DelegationInput, 'operation' | 'resource'> & {
  grantee_subject_id: string | null;
  grantee_client_id: string | null;
  expires_at: string | null;
};

/** The grantee field that goes with grantee_type, a known grantee client, and expires_at as an ISO instant. */
async function normalized(deps: DelegationDeps, tenant: string, body: DelegationRequest): Promise<NormalizedRequest> {
  const subjectId = body.grantee_type === 'subject' ? body.grantee_subject_id : undefined;
  const clientId =
    body.grantee_type === 'client' && body.grantee_client_id !== undefined ? String(body.grantee_client_id) : undefined;
  const expected = body.grantee_type === 'subject' ? 'grantee_subject_id' : 'grantee_client_id';
  const other = body.grantee_type === 'subject' ? 'grantee_client_id' : 'grantee_subject_id';
  if (subjectId === undefined && clientId === undefined)
    throw badRequest(`${expected} is required when grantee_type is ${body.grantee_type}`, { field: expected });
  if (body[other] !== undefined)
    throw badRequest(`${other} does not go with grantee_type ${body.grantee_type}`, { field: other });
  if (clientId !== undefined && !(await deps.parties.client(tenant, clientId, null)))
    throw badRequest('grantee_client_id names no client of this tenant', { field: 'grantee_client_id' });
  return {
    grantee_type: body.grantee_type,
    grantee_subject_id: subjectId ?? null,
    grantee_client_id: clientId ?? null,
    resource_id: body.resource_id,
    scopes: body.scopes,
    expires_at: instant(body.expires_at ?? null),
  };
}

function requestOf(record: DelegationRecord): NormalizedRequest {
  const { delegation_id: _id, owner: _owner, ...request } = delegationGrant(record);
  return request;
}

/** The spec: "currently only expires_at is updated". Repeating another field unchanged is fine; changing it is a 400. */
function assertOnlyExpiryChanges(record: DelegationRecord, body: Partial<DelegationRequest>): void {
  const stored = requestOf(record);
  for (const field of ['grantee_type', 'grantee_subject_id', 'grantee_client_id', 'resource_id', 'scopes'] as const) {
    const given = body[field];
    if (given === undefined) continue;
    const same =
      field === 'scopes'
        ? sameSet(given as string[], stored.scopes)
        : (field === 'grantee_client_id' ? String(given) : given) === stored[field];
    if (!same) throw badRequest(`${field} cannot be changed; only expires_at is updated`, { field });
  }
}

function sameSet(given: string[], stored: string[]): boolean {
  return given.length === stored.length && given.every((scope) => stored.includes(scope));
}

async function decide(
  ctx: ApiContext,
  deps: DelegationDeps,
  owner: DelegationOwner,
  operation: DelegationInput['operation'],
  request: NormalizedRequest,
) {
  const tenant = ctx.state.tenant.name;
  const resource = await findResource(deps.store, tenant, request.resource_id);
  const outcome = await deps.policy.decide('delegation', {
    tenant,
    client: await deps.parties.client(tenant, owner.clientId, 'bearer'),
    subject: owner.sub ? await deps.parties.subject(tenant, owner.sub) : null,
    request: requestInput({ endpoint: ctx.path, method: ctx.method, parameters: { ...request } }),
    delegation: { operation, ...request, resource: resourceInput(resource) },
    time: new Date().toISOString(),
  });
  recordDecision(ctx.state, outcome);
  enforceHttp.http(outcome, DELEGATION_DENIALS);
  return outcome.decision;
}

/** The policy's code (default access_denied, a 403; any other a 400). */
const DELEGATION_DENIALS: DenyRules = { statusOf: (code) => (code === 'access_denied' ? 403 : 400) };

/** Instants the policy engine can compare (OPA's nanosecond time covers 1677 to 2262). */
const LATEST_INSTANT = Date.parse('2262-01-01T00:00:00Z');

/**
 * An ISO 8601 date-time as the canonical UTC instant the policy contract uses. The schema's
 * date-time format admits what JavaScript dates cannot hold (a leap second, 23:59:60): a 400.
 */
function instant(value: string | null): string | null {
  if (value === null) return null;
  const time = Date.parse(value);
  if (Number.isNaN(time))
    throw badRequest('expires_at is not an instant this server can represent (a leap second?)', {
      field: 'expires_at',
    });
  if (time < 0 || time >= LATEST_INSTANT)
    throw badRequest('expires_at must be between 1970 and 2261', { field: 'expires_at' });
  return new Date(time).toISOString();
}
