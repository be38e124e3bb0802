import type { DelegationGrantInput } from '../policy/index.js';
import {
  inPacedSteps,
  ROW_BY_ROW_PACE,
  TurnReads,
  type CollectionSpec,
  type Filter,
  type Store,
  type StoredDoc,
  type TenantCollection,
} from '../store/index.js';

/** A delegation as stored (spec: delegation record). `validUntil` is the API's expires_at. */
export interface DelegationRecord extends StoredDoc {
  /** When the store deletes it (keptUntil): a while after it was revoked or expired; null or absent while it may stay active. */
  expiresAt?: number | null;
  id: string;
  ownerSub: string | null;
  ownerClientId: string;
  granteeType: 'subject' | 'client';
  granteeSubjectId: string | null;
  granteeClientId: string | null;
  resourceId: string;
  scopes: string[];
  /** ISO 8601, or null: until revoked. (Not the store's `expiresAt`: an expired delegation is still listed a while.) */
  validUntil: string | null;
  createdAt: string;
  revokedAt: string | null;
}

export const DELEGATIONS_COLLECTION: CollectionSpec = {
  name: 'delegations',
  // Each read of a decision by both of its keys (delegationsToClientBy, activeDelegations): a
  // grantee anyone may delegate to holds any number; what one user gave a client, or what was
  // delegated on one resource, is one owner's doing.
  indexes: [
    ['granteeSubjectId', 'resourceId'],
    ['granteeClientId', 'ownerSub'],
    ['granteeClientId', 'resourceId'],
    'ownerSub',
    'ownerClientId',
    'resourceId',
  ],
};

export function delegations(store: Store, tenant: string): TenantCollection<DelegationRecord> {
  return store.collection<DelegationRecord>(DELEGATIONS_COLLECTION, tenant);
}

/** Who manages a delegation: the user of the caller's token, else its client. */
export interface DelegationOwner {
  sub: string | null;
  clientId: string;
}

/** A user manages their delegations from any client; a client without a user manages its own. */
export function ownedBy(owner: DelegationOwner): Filter {
  return owner.sub ? { ownerSub: owner.sub } : { ownerSub: null, ownerClientId: owner.clientId };
}

export function isOwner(record: DelegationRecord, owner: DelegationOwner): boolean {
  return owner.sub
    ? record.ownerSub === owner.sub
    : record.ownerSub === null && record.ownerClientId === owner.clientId;
}

/**
 * How long a revoked or expired delegation is still listed (status `revoked`, `expired`) before
 * the store deletes it: an owner could otherwise make and revoke delegations for ever, each
 * stored for good, past DELEGATIONS_PER_OWNER, which counts them until then.
 */
export const DELEGATION_KEPT_MS = 7 * 24 * 3600 * 1000;

/** The store's `expiresAt` of a delegation: DELEGATION_KEPT_MS after it was revoked or expired; none while it may stay active. */
export function keptUntil(record: Pick<DelegationRecord, 'revokedAt' | 'validUntil'>): number | undefined {
  const ends = [record.revokedAt, record.validUntil].filter((instant): instant is string => instant !== null);
  return ends.length ? Math.min(...ends.map((instant) => Date.parse(instant))) + DELEGATION_KEPT_MS : undefined;
}

/**
 * Gives the owner's delegations that were revoked or expired before delegations had a deletion
 * time (keptUntil) theirs, at most `atMost` read: else they would count toward
 * DELEGATIONS_PER_OWNER for ever. One revoked more than DELEGATION_KEPT_MS ago is then deleted by
 * the store. Returns how many were dated.
 */
export async function dateEndedDelegations(
  store: Store,
  tenant: string,
  owner: DelegationOwner,
  atMost: number,
): Promise<number> {
  const collection = delegations(store, tenant);
  const undated = await collection.find({ ...ownedBy(owner), expiresAt: null }, { limit: atMost });
  let dated = 0;
  for (const record of undated) {
    const expiresAt = keptUntil(record);
    if (expiresAt !== undefined && (await collection.update(record.id, { expiresAt }))) dated += 1;
  }
  return dated;
}

export function statusOf(record: DelegationRecord, now = Date.now()): 'active' | 'revoked' | 'expired' {
  if (record.revokedAt) return 'revoked';
  return record.validUntil && Date.parse(record.validUntil) <= now ? 'expired' : 'active';
}

/** The parties a decision on one UMA resource concerns: its subject and its client. */
export interface Grantees {
  sub?: string | null;
  clientId?: string | null;
  /** The UMA resource: only its owner delegates on it. */
  resourceId: string;
}

/** Unrevoked delegations read this turn (TurnReads): every token request and introspection asks for its parties' ones. */
const delegationsReadThisTurn = new TurnReads<DelegationRecord[]>({
  collections: [DELEGATIONS_COLLECTION.name],
  // A delegation may name 100 scopes of 256 characters: a list is weighed by them.
  weigh: (records: DelegationRecord[]) =>
    records.reduce((sum, record) => sum + 300 + record.scopes.reduce((length, scope) => length + scope.length, 0), 0),
});

/**
 * The active delegations (neither revoked nor expired) whose grantee is the subject or the
 * client, on the resource, as decisions see them. Revoked and expired ones never reach a policy.
 * Only the resource's owner delegates on it: one owner's doing, bounded by DELEGATIONS_PER_OWNER.
 */
export async function activeDelegations(
  store: Store,
  tenant: string,
  grantees: Grantees,
): Promise<DelegationGrantInput[]> {
  const onResource = { resourceId: grantees.resourceId };
  const [toSubject, toClient] = await Promise.all([
    grantees.sub
      ? activeOf(store, tenant, { granteeType: 'subject', granteeSubjectId: grantees.sub, ...onResource })
      : [],
    grantees.clientId
      ? activeOf(store, tenant, { granteeType: 'client', granteeClientId: grantees.clientId, ...onResource })
      : [],
  ]);
  return [...toSubject, ...toClient];
}

/**
 * The active delegations a user made to a client: what a decision about that user's token at that
 * client is given (token, introspect, token_exchange); none for a token without a user. Read by
 * both keys, so that what anyone else delegates to the user or to the client never rides along
 * (found 2026-11-29: 10,000 delegations to a client made each of its /token inputs 2.2 MB and its
 * p50 585 ms; 2,000 of the largest to a user, made by another, made her introspections 503).
 */
export async function delegationsToClientBy(
  store: Store,
  tenant: string,
  user: string | null | undefined,
  clientId: string,
): Promise<DelegationGrantInput[]> {
  if (!user) return [];
  return activeOf(store, tenant, { granteeType: 'client', granteeClientId: clientId, ownerSub: user });
}

/**
 * Every active delegation to a user, or null when there are more than `atMost`: anyone may
 * delegate to a user, so a caller that would read them all reads them otherwise past a bound.
 */
export async function delegationsToSubjectUpTo(
  store: Store,
  tenant: string,
  sub: string,
  atMost: number,
): Promise<DelegationGrantInput[] | null> {
  const found = await delegations(store, tenant).find(
    { granteeType: 'subject', granteeSubjectId: sub, revokedAt: null },
    { limit: atMost + 1 },
  );
  return found.length > atMost ? null : activeGrants(found);
}

/** The active delegations matching `filter`, read once a turn. */
async function activeOf(store: Store, tenant: string, filter: Filter): Promise<DelegationGrantInput[]> {
  const unrevoked = await delegationsReadThisTurn.read(store, JSON.stringify([tenant, filter]), () =>
    delegations(store, tenant).find({ ...filter, revokedAt: null }),
  );
  return activeGrants(unrevoked);
}

/** The records still active now (expiry is judged now, not when they were read), as decisions see them. */
function activeGrants(records: readonly DelegationRecord[]): DelegationGrantInput[] {
  const now = Date.now();
  return records.filter((record) => statusOf(record, now) === 'active').map(delegationGrant);
}

/** Which of the delegations `ids` are active now (neither revoked nor expired): one read. */
export async function activeDelegationIds(store: Store, tenant: string, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const now = Date.now();
  const found = await delegations(store, tenant).getMany(ids);
  return new Set(found.filter((record) => statusOf(record, now) === 'active').map((record) => record.id));
}

/** What a delegation hangs on besides its owner's will: its grantee or owning client or user, or its resource. */
export type DelegationAnchor = { clientId: string } | { subjectId: string } | { resourceId: string };

/**
 * Revokes (as its owner would: `revokedAt` now) every unrevoked delegation that hangs on a client,
 * a user or a UMA resource that was deleted: to that client or user, of that client (owned by it,
 * no user) or user, or on that resource. A client or user made again under the same id inherits
 * none. Returns how many.
 */
export async function revokeDelegationsOf(store: Store, tenant: string, anchor: DelegationAnchor): Promise<number> {
  const collection = delegations(store, tenant);
  const hanging: Filter[] =
    'resourceId' in anchor
      ? [{ resourceId: anchor.resourceId }]
      : 'subjectId' in anchor
        ? [{ granteeType: 'subject', granteeSubjectId: anchor.subjectId }, { ownerSub: anchor.subjectId }]
        : [
            { granteeType: 'client', granteeClientId: anchor.clientId },
            { ownerSub: null, ownerClientId: anchor.clientId },
          ];
  const revokedAt = new Date().toISOString();
  let revoked = 0;
  // In paced steps (src/store/paced.ts): a user or client may hold tens of thousands, and on SQLite
  // each update is synchronous (found 2026-11-29: 20,000 held the event loop 1.1 s).
  for (const filter of hanging)
    await inPacedSteps(async (limit) => {
      const batch = await collection.find({ ...filter, revokedAt: null }, { limit });
      for (const record of batch) {
        const ended = { revokedAt, expiresAt: keptUntil({ ...record, revokedAt }) };
        if (await collection.update(record.id, ended, { revokedAt: null })) revoked += 1;
      }
      return batch.length;
    }, ROW_BY_ROW_PACE);
  return revoked;
}

/** Every active delegation on one UMA resource, whoever its grantee (AuthZEN subject searches). */
export async function activeDelegationsOn(
  store: Store,
  tenant: string,
  resourceId: string,
): Promise<DelegationGrantInput[]> {
  return activeGrants(await delegations(store, tenant).find({ resourceId, revokedAt: null }));
}

/** A delegation as decisions see it (input.delegations). */
export function delegationGrant(record: DelegationRecord): DelegationGrantInput {
  return {
    delegation_id: record.id,
    grantee_type: record.granteeType,
    grantee_subject_id: record.granteeSubjectId,
    grantee_client_id: record.granteeClientId,
    resource_id: record.resourceId,
    // A copy: the record may be shared by the requests of one turn (TurnReads).
    scopes: [...record.scopes],
    expires_at: record.validUntil,
    owner: { sub: record.ownerSub, client_id: record.ownerSub ? null : record.ownerClientId },
  };
}

/** The delegation object the API answers with. */
export function presentDelegation(record: DelegationRecord): Record<string, unknown> {
  return {
    delegation_id: record.id,
    grantee_type: record.granteeType,
    ...(record.granteeType === 'subject'
      ? { grantee_subject_id: record.granteeSubjectId }
      : { grantee_client_id: record.granteeClientId }),
    resource_id: record.resourceId,
    scopes: record.scopes,
    expires_at: record.validUntil,
    created_at: record.createdAt,
    revoked_at: record.revokedAt,
    status: statusOf(record),
  };
}
