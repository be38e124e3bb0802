import { ConflictError, type Store } from '../../store/index.js';
import { SUBJECTS_COLLECTION, subjectsCollection } from '../userinfo/accounts.js';
import type { SubjectRecord } from '../shared/subject-input.js';
import { SignInError } from './errors.js';
import { enabledIdentityProviderCount, type IdentityProviderRecord } from './identity-providers.js';
import type { UpstreamIdentity } from './upstream.js';

export interface SubjectScope {
  store: Store;
  /** Store tenant. */
  tenant: string;
  /** What records carry as tenantId (null for the default tenant). */
  tenantId: string | null;
}

/**
 * Creates or refreshes the subject of an upstream sign-in and returns its subjectId (the
 * upstream `sub`). The upstream is the source of truth: the profile is replaced by what it
 * says now, and nothing beyond the spec's short list is kept.
 *
 * subjectId is unique per tenant, not per provider. A subject already bound to another
 * provider is refused rather than taken over, since two providers may issue the same sub
 * for different people; a subject created through the Admin API without a provider is
 * bound to the provider that signs it in, while the tenant has only that one. With several,
 * it is refused until an operator names its provider: found 2026-11-29, any user could pick
 * the provider (upstream_idp), so whoever was that sub at another provider took the
 * subject (its delegations, UMA resources, roles) and locked its person out.
 */
export async function rememberSubject(
  scope: SubjectScope,
  idp: IdentityProviderRecord,
  identity: UpstreamIdentity,
): Promise<string> {
  const subjects = subjectsCollection(scope.store, scope.tenant);
  const existing = await subjects.findOne({ subjectId: identity.sub });
  if (existing) {
    if (existing.identityProviderId == null && (await enabledIdentityProviderCount(scope.store, scope.tenant)) > 1)
      throw new SignInError(
        'access_denied',
        'this account was made without an identity provider and the tenant has several: an operator names its provider first',
      );
    await subjects.upsert(refreshed(existing, idp, identity));
    return identity.sub;
  }
  try {
    await subjects.insert(await created(scope, idp, identity));
  } catch (error) {
    // Signed in twice at once: the other sign-in created it; refresh that record instead.
    if (!(error instanceof ConflictError)) throw error;
    return rememberSubject(scope, idp, identity);
  }
  return identity.sub;
}

function refreshed(existing: SubjectRecord, idp: IdentityProviderRecord, identity: UpstreamIdentity): SubjectRecord {
  if (existing.identityProviderId != null && existing.identityProviderId !== idp.id) {
    throw new SignInError('access_denied', 'this account belongs to another identity provider');
  }
  const { id, tenantId, createdAt } = existing;
  return { id, tenantId, createdAt, ...profile(idp, identity), updatedAt: new Date().toISOString() };
}

async function created(
  scope: SubjectScope,
  idp: IdentityProviderRecord,
  identity: UpstreamIdentity,
): Promise<SubjectRecord> {
  const now = new Date().toISOString();
  // The Admin API's numeric ids come from the same sequence.
  const id = await scope.store.nextSequence(SUBJECTS_COLLECTION);
  return { id, tenantId: scope.tenantId, createdAt: now, updatedAt: now, ...profile(idp, identity) };
}

/** The stored profile: subject id, provider reference and the spec's claims, nothing else. */
function profile(idp: IdentityProviderRecord, identity: UpstreamIdentity) {
  const { sub, name, email, emailVerified, preferredUsername } = identity;
  const fields = { subjectId: sub, identityProviderId: idp.id, name, email, emailVerified, preferredUsername };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as Pick<
    SubjectRecord,
    'subjectId' | 'identityProviderId'
  >;
}
