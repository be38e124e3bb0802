import type { AdapterPayload } from 'oidc-provider';
import { remainingArtefacts, revokeArtefacts, type ArtefactOwners } from '../../../adapters/oidc/index.js';
import { subjectRecords } from '../../catalog/index.js';
import { activeDelegationIds, revokeDelegationsOf } from '../../delegation/index.js';
import { inPacedSteps, pageAfter, ROW_BY_ROW_PACE, type Store } from '../../store/index.js';
import { deleteTicketsOf, umaResources } from '../../uma/index.js';
import { permissionsOf } from '../token/grants/uma-ticket/permissions.js';
import { delegationIdsOf, exchangedFromOf } from '../token/grants/token-exchange/access-token.js';
import {
  clientRecordSeenByRequest,
  clientsCollection,
  currentClientRecord,
  findClientRecord,
  type ClientRecord,
} from '../clients/records.js';
import { grantTypes } from '../clients/metadata.js';
import { looksLikeDocumentUrl } from '../register/cimd/url.js';
import { SUBJECT_ISSUER } from '../state.js';
import { speaksFor } from './subject-issuer.js';

/**
 * Tokens die with their client and their user. Every grant, code and token oidc-provider keeps
 * is in the shared store (adapters/oidc), indexed by client and by user: deleting them there
 * revokes them on every node at once, since no node keeps a token anywhere else. Each function
 * answers how many artefacts it deleted.
 */

/**
 * A client disabled, deleted, or whose tokens an operator revokes: its token epoch moved on (so
 * that nothing issued before, even if written after the sweep, is honoured again: ArtefactOwners),
 * then every artefact of it deleted, whoever the user, except those issued under the new epoch
 * (an operator's revocation leaves the client enabled). Called after the record was disabled or
 * deleted, so that no request can issue under the new epoch before it is enabled again. (All
 * others, not those of the epoch just ended, and for a client ID metadata document all of them:
 * its record made again starts its epochs over, so an older mark may come round again.)
 */
export async function revokeClientArtefacts(store: Store, tenant: string, clientId: string): Promise<number> {
  const clients = clientsCollection(store, tenant);
  const record = await clients.findOne({ clientId });
  if (!record) return revokeArtefacts(store, tenant, { clientId });
  const moved = { ...record, tokenEpoch: epochOf(record) + 1 };
  await clients.update(record.id, { tokenEpoch: moved.tokenEpoch });
  // What the client is issued from now on (once enabled) carries the new epoch's mark: not swept.
  // Not for a client ID metadata document, whose marks may come round again (its record made anew).
  const keepMark = record.registrationType === 'cimd' ? undefined : markOf(moved);
  return revokeArtefacts(store, tenant, { clientId, ...(keepMark ? { keepMark } : {}) });
}

/**
 * A client deleted (Admin API, RFC 7592): its artefacts revoked as for a disable, and the UMA
 * delegations to it or of it (as their owner) revoked, the permission tickets it asked for
 * deleted, so that a client made again under the same clientId inherits none of them.
 */
export async function revokeDeletedClient(store: Store, tenant: string, clientId: string): Promise<number> {
  const revoked = await revokeClientArtefacts(store, tenant, clientId);
  await revokeDelegationsOf(store, tenant, { clientId });
  await deleteTicketsOf(store, tenant, clientId);
  return revoked;
}

/**
 * A subject deleted or renamed (Admin API), or whose account its provider purged or gave to
 * someone else (Shared Signals): its artefacts, and the delegations to it or of it (as their
 * owner) revoked, so that a user signed in again under the same subjectId inherits none of them.
 */
export async function revokeDeletedSubject(store: Store, tenant: string, subjectId: string): Promise<number> {
  const revoked = await revokeSubjectArtefacts(store, tenant, subjectId);
  await revokeDelegationsOf(store, tenant, { subjectId });
  return revoked;
}

/** A subject deleted, or whose tokens an operator revokes: its grants, codes, tokens and sessions at every client. */
export function revokeSubjectArtefacts(store: Store, tenant: string, subjectId: string): Promise<number> {
  return revokeArtefacts(store, tenant, { accountId: subjectId });
}

/**
 * An identity provider disabled or deleted: the artefacts of every subject it signed in (the
 * subjects stay). Its subjects are read a page at a time, in paced steps (src/store/paced.ts): an
 * identity provider may have signed in 100,000 users, and on SQLite a revocation each, awaited
 * one after another, never gave the event loop back (found 2026-11-29: 5,000 held it 140 ms).
 */
export async function revokeIdentityProviderArtefacts(
  store: Store,
  tenant: string,
  identityProviderId: number,
): Promise<number> {
  const subjects = subjectRecords(store, tenant);
  let revoked = 0;
  let last: number | undefined;
  // A revocation per subject, one after another: row by row (ROW_BY_ROW_PACE), as delegation updates are.
  await inPacedSteps(async (limit) => {
    const page = await pageAfter(subjects, { identityProviderId }, last, 0, limit);
    for (const subject of page) revoked += await revokeSubjectArtefacts(store, tenant, subject.subjectId);
    last = page.at(-1)?.id;
    return page.length;
  }, ROW_BY_ROW_PACE);
  return revoked;
}

/**
 * What the store adapter asks of a client's artefacts (adapters/oidc ArtefactOwners). An artefact is
 * marked with the record it was issued under, `<record id>:<token epoch>`, as the request saw it
 * when it looked the client up (before issuing; else, outside oidc-provider's requests, as read
 * now): a revocation after that look-up moves the epoch on, and a client deleted and made again
 * under the same clientId is another record. It is honoured while its client is enabled with the
 * same mark. One read of the client record at use, shared by the lookups of the turn (TurnReads),
 * never a record kept between requests (currentClientRecord): a change through another node ends
 * the tokens at once.
 */
export function clientArtefactOwners(store: Store, tenant: string): ArtefactOwners {
  return {
    async markOf(clientId) {
      const record = clientRecordSeenByRequest(clientId) ?? (await findClientRecord(store, tenant, clientId));
      return record && record.enabled !== false ? markOf(record) : null;
    },
    async honours({ clientId, mark, payload }) {
      return (
        (await issuedUnderCurrentEpoch(clientId, mark)) &&
        (await permissionsStillRest(payload)) &&
        (await exchangedFromRemain(payload)) &&
        (await issuerStillSpeaksFor(payload))
      );
    },
  };

  async function issuedUnderCurrentEpoch(clientId: string, mark: string | null | undefined): Promise<boolean> {
    const record = await currentClientRecord(store, tenant, clientId);
    // A client ID metadata document's expired record is made again on its next use (isClientLive).
    if (!record) return looksLikeDocumentUrl(clientId) && mark !== null;
    if (record.enabled === false) return false;
    // Written before artefacts were marked: honoured until the client's first revocation.
    return mark === undefined ? epochOf(record) === 0 : mark === markOf(record);
  }

  /**
   * A requesting party token hangs on the UMA resources it permits, and on the delegations a
   * permission rests on: once a resource is deleted, or every delegation of a permission is revoked
   * or expired, the token is not found (the client asks for a new one for what remains). A read
   * each, for RPTs only.
   */
  async function permissionsStillRest(payload: AdapterPayload): Promise<boolean> {
    const permissions = permissionsOf(payload);
    const ids = [...new Set(permissions.map((permission) => permission.resource_id))];
    if (ids.length > 0 && (await umaResources(store, tenant).getMany(ids)).length !== ids.length) return false;
    const delegated = permissions.filter((permission) => permission.delegation_ids?.length);
    if (delegated.length === 0) return true;
    const active = await activeDelegationIds(store, tenant, [
      ...new Set(delegated.flatMap((permission) => permission.delegation_ids!)),
    ]);
    return delegated.every((permission) => permission.delegation_ids!.some((id) => active.has(id)));
  }

  /**
   * A token exchanged from an external issuer's ID token lives while that issuer may speak for its
   * user: not once a user of that `sub` signs in through another provider (a read, for such tokens only).
   */
  async function issuerStillSpeaksFor(payload: AdapterPayload): Promise<boolean> {
    const issuer = (payload.extra as Record<string, unknown> | undefined)?.[SUBJECT_ISSUER];
    if (typeof issuer !== 'string' || typeof payload.accountId !== 'string') return true;
    return speaksFor(store, tenant, issuer, payload.accountId);
  }

  /**
   * An exchanged token lives while the tokens it was exchanged from are stored (a read, for
   * exchanged tokens only), and, of each exchange in that chain that rested on delegations
   * (DELEGATION_IDS), while one of them is active.
   */
  async function exchangedFromRemain(payload: AdapterPayload): Promise<boolean> {
    const chain = await remainingArtefacts(store, tenant, exchangedFromOf(payload.extra));
    if (chain === null) return false;
    const restingOn = [payload, ...chain].map((each) => delegationIdsOf(each.extra)).filter((ids) => ids.length);
    if (restingOn.length === 0) return true;
    const active = await activeDelegationIds(store, tenant, [...new Set(restingOn.flat())]);
    return restingOn.every((ids) => ids.some((id) => active.has(id)));
  }
}

function epochOf(record: ClientRecord): number {
  return typeof record.tokenEpoch === 'number' ? record.tokenEpoch : 0;
}

/**
 * A client ID metadata document's record comes and goes with its cache (it expires and is made
 * again under a new id), so its artefacts hang on the document (its clientId), not on one record.
 */
function markOf(record: ClientRecord): string {
  return `${record.registrationType === 'cimd' ? 'cimd' : record.id}:${epochOf(record)}`;
}

/**
 * Whether a token of `clientId` may still be honoured: its client exists and is enabled. A
 * client ID metadata document whose cached record has expired is still a client (its record
 * is made again on its next use); one an operator deleted had its tokens deleted with it.
 * This catches a token written while its client was being disabled or deleted, after the
 * revocation had swept the store. A refresh token (`kind`) is honoured only while its client
 * keeps the refresh_token grant: once an operator took it away, no refresh succeeds, and
 * introspection must not call the token active (found 2026-11-29).
 */
export async function isClientLive(store: Store, tenant: string, clientId: string, kind?: string): Promise<boolean> {
  const record = await currentClientRecord(store, tenant, clientId);
  if (!record) return looksLikeDocumentUrl(clientId);
  if (record.enabled === false) return false;
  return kind !== 'RefreshToken' || grantTypes(record).includes('refresh_token');
}
