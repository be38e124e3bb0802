import { subjectRecords, type SubjectRecord } from '../../catalog/index.js';
import type { SubjectInput } from '../../policy/index.js';
import type { Store } from '../../store/index.js';

export type { SubjectRecord };

/** `input.subject` for a signed-in user: the stored profile claims and the provider reference. */
export async function subjectInput(store: Store, tenant: string, sub: string): Promise<SubjectInput> {
  const record = await subjectRecords(store, tenant).findOne({ subjectId: sub });
  if (!record) return { sub, idp: null, claims: {} };
  const claims = {
    name: record.name,
    email: record.email,
    email_verified: record.emailVerified,
    preferred_username: record.preferredUsername,
  };
  return {
    sub,
    idp: record.identityProviderId === undefined ? null : String(record.identityProviderId),
    claims: Object.fromEntries(Object.entries(claims).filter(([, value]) => value !== undefined)),
  };
}
