import type { Account, AccountClaims, ClaimsParameterMember, KoaContextWithOIDC } from 'oidc-provider';
import { claimsOf } from '../claims.js';
import { CLAIM_SCOPES } from '../state.js';
import { decisionOf } from '../token/grants/decision.js';
import { subjectRecords } from '../../catalog/index.js';
import type { Store, TenantCollection } from '../../store/index.js';
import type { ConfigurationSlice } from '../context.js';
import type { SubjectRecord } from '../shared/subject-input.js';

/** Store collection, and numeric id sequence, of subjects. */
export const SUBJECTS_COLLECTION = subjectRecords.spec.name;

/** The tenant's subjects, declared with the Admin API's unique key (subjectId) so that every writer enforces it. */
export function subjectsCollection(store: Store, tenant: string): TenantCollection<SubjectRecord> {
  return subjectRecords(store, tenant);
}

/**
 * oidc-provider accounts are Arbiter's subjects: whoever signed in through an upstream
 * provider (or was created through the Admin API). An unknown or deleted subject has no
 * account, so its tokens stop working at UserInfo.
 */
export const accounts: ConfigurationSlice = ({ store, tenant }) => ({
  async findAccount(ctx, sub, token) {
    const subject = await subjectsCollection(store, tenant).findOne({ subjectId: sub });
    return subject ? accountOf(subject, releasingScopes(ctx, token)) : undefined;
  },
});

/**
 * The scopes whose claims a use of the account may release, when the request's own decision (or
 * the access token's) bounds them: at UserInfo, the access token's scopes and those it was issued
 * with for its `claims` request (CLAIM_SCOPES; none kept: the grant's bound alone, as for tokens
 * issued before); elsewhere (the ID token at /token), what the request's decision granted, which
 * a code's or refresh token's scope no longer granted does not widen.
 */
function releasingScopes(ctx: KoaContextWithOIDC, token: unknown): readonly string[] | undefined {
  const kind = (token as { kind?: unknown } | undefined)?.kind;
  if (kind === 'AccessToken' || kind === 'ClientCredentials') {
    const { extra, scope } = token as { extra?: Record<string, unknown>; scope?: unknown };
    const kept = extra?.[CLAIM_SCOPES];
    if (!Array.isArray(kept)) return undefined;
    return [...(typeof scope === 'string' ? scope.split(' ') : []), ...(kept as string[])];
  }
  return decisionOf(ctx)?.scopes;
}

/**
 * Every claim Arbiter knows; oidc-provider releases only those of the granted scopes and of the
 * granted `claims` request (src/oauth/claims.ts, authorize/grant.ts); and, where the decision
 * bounds them (`releasing`), only those of the scopes it granted.
 */
function accountOf(subject: SubjectRecord, releasing: readonly string[] | undefined): Account {
  const claims: AccountClaims = {
    sub: subject.subjectId,
    name: subject.name,
    preferred_username: subject.preferredUsername,
    email: subject.email,
    email_verified: subject.emailVerified,
  };
  return {
    accountId: subject.subjectId,
    claims: (_use, _scope, requested) => {
      const releasable = releasing && claimsOf(releasing);
      return Object.fromEntries(
        Object.entries(claims).filter(
          ([name, value]) =>
            value !== undefined &&
            (name === 'sub' || ((!releasable || releasable.has(name)) && hasRequestedValue(value, requested?.[name]))),
        ),
      ) as AccountClaims;
    },
  };
}

/**
 * A claim the `claims` parameter asks for "with a particular value" (`value`, `values`; OIDC Core
 * §5.5.1) is released only when it has that value: the person's other value was not asked for.
 * (`sub` with a value is oidc-provider's own check: a login for that subject.)
 */
function hasRequestedValue(value: unknown, request: ClaimsParameterMember | null | undefined): boolean {
  if (!request) return true;
  const wanted = [...(request.value === undefined ? [] : [request.value]), ...(request.values ?? [])];
  return wanted.length === 0 || wanted.includes(value as string);
}
