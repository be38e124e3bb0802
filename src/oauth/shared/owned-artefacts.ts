import { revokeArtefacts } from '../../../adapters/oidc/index.js';
import { subjectRecords } from '../../catalog/index.js';
import type { Store } from '../../store/index.js';
import { findClientRecord } from '../clients/records.js';
import { looksLikeDocumentUrl } from '../register/cimd/url.js';
import type { SubjectRecord } from './subject-input.js';

/**
 * Tokens die with their client and their user. Every grant, code and token oidc-provider keeps
 * is in the shared store (adapters/oidc), indexed by client and by user: deleting them there
 * revokes them on every node at once, since no node keeps a token anywhere else. Each function
 * answers how many artefacts it deleted.
 */

/** A client disabled, deleted, or whose tokens an operator revokes: every artefact of it, whoever the user. */
export function revokeClientArtefacts(store: Store, tenant: string, clientId: string): Promise<number> {
  return revokeArtefacts(store, tenant, { clientId });
}

/** A subject deleted, or whose tokens an operator revokes: its grants, codes, tokens and sessions at every client. */
export function revokeSubjectArtefacts(store: Store, tenant: string, subjectId: string): Promise<number> {
  return revokeArtefacts(store, tenant, { accountId: subjectId });
}

/** An identity provider deleted: the artefacts of every subject it signed in (the subjects stay). */
export async function revokeIdentityProviderArtefacts(
  store: Store,
  tenant: string,
  identityProviderId: number,
): Promise<number> {
  const subjects = await subjectRecords<SubjectRecord>(store, tenant).find({ identityProviderId });
  let revoked = 0;
  for (const subject of subjects) revoked += await revokeSubjectArtefacts(store, tenant, subject.subjectId);
  return revoked;
}

/**
 * Whether a token of `clientId` may still be honoured: its client exists and is enabled. A
 * client ID metadata document whose cached record has expired is still a client (its record
 * is made again on its next use); one an operator deleted had its tokens deleted with it.
 * This catches a token written while its client was being disabled or deleted, after the
 * revocation had swept the store.
 */
export async function isClientLive(store: Store, tenant: string, clientId: string): Promise<boolean> {
  const record = await findClientRecord(store, tenant, clientId);
  return record ? record.enabled !== false : looksLikeDocumentUrl(clientId);
}
