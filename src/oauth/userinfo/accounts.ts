import type { Account, AccountClaims } from 'oidc-provider';
import { subjectRecords } from '../../catalog/index.js';
import type { Store, TenantCollection } from '../../store/index.js';
import type { ConfigurationSlice } from '../context.js';
import type { SubjectRecord } from '../shared/subject-input.js';

/** Store collection, and numeric id sequence, of subjects. */
export const SUBJECTS_COLLECTION = subjectRecords.spec.name;

/** The tenant's subjects, declared with the Admin API's unique key (subjectId) so that every writer enforces it. */
export function subjectsCollection(store: Store, tenant: string): TenantCollection<SubjectRecord> {
  return subjectRecords<SubjectRecord>(store, tenant);
}

/**
 * oidc-provider accounts are Arbiter's subjects: whoever signed in through an upstream
 * provider (or was created through the Admin API). An unknown or deleted subject has no
 * account, so its tokens stop working at UserInfo.
 */
export const accounts: ConfigurationSlice = ({ store, tenant }) => ({
  async findAccount(_ctx, sub) {
    const subject = await subjectsCollection(store, tenant).findOne({ subjectId: sub });
    return subject ? accountOf(subject) : undefined;
  },
});

/** Every claim Arbiter knows; oidc-provider releases only those of the granted scopes (src/oauth/claims.ts). */
function accountOf(subject: SubjectRecord): Account {
  const claims: AccountClaims = {
    sub: subject.subjectId,
    name: subject.name,
    preferred_username: subject.preferredUsername,
    email: subject.email,
    email_verified: subject.emailVerified,
  };
  return {
    accountId: subject.subjectId,
    claims: () =>
      Object.fromEntries(Object.entries(claims).filter(([, value]) => value !== undefined)) as AccountClaims,
  };
}
