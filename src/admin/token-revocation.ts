import type Router from '@koa/router';
import { auditFactsOf } from '../audit/index.js';
import { clientRecords, subjectRecords } from '../catalog/index.js';
import { notFound } from '../http/errors.js';
import {
  revokeClientArtefacts,
  revokeDeletedClient,
  revokeDeletedSubject,
  revokeIdentityProviderArtefacts,
  revokeSubjectArtefacts,
  type LogoutNotices,
} from '../oauth/index.js';
import type { Store } from '../store/index.js';
import { storeTenant } from '../tenancy/index.js';
import type { StoredRecord } from '../records/index.js';
import type { AdminContext } from './state.js';
import type { AdminChange } from '../signals/index.js';

/**
 * Tokens die with their client and their user. An Admin change that takes a client, a subject
 * or an identity provider away revokes the grants, codes and tokens that hang on it, in the
 * shared store (src/oauth/shared/owned-artefacts.ts), before the call is answered: every node
 * refuses them from then on. And an operator can revoke them all without changing the record.
 */

/**
 * OIDC Back-Channel Logout: tells the clients of a subject's sessions (in the tenant, null: the
 * default) that they ended, before the sessions are revoked (src/oauth/end-session/backchannel.ts).
 */
export type LogoutNotifier = (tenantId: string | null, subjectId: string) => Promise<LogoutNotices>;

/** The collections whose changes revoke tokens (their Admin path). */
type Revoking = 'clients' | 'subjects' | 'identity-providers';

/**
 * After a replace (`after` the new record) or a delete (`after` null): revokes what the change
 * took away. A client disabled or deleted, a subject deleted or renamed (its old subjectId), an
 * identity provider disabled or deleted (its subjects' artefacts; the subjects stay). Returns how many
 * artefacts were deleted.
 */
export async function revokeAfterChange(
  store: Store,
  path: string,
  tenantId: string | null,
  before: StoredRecord,
  after: StoredRecord | null,
  logoutNotices?: LogoutNotifier,
): Promise<number> {
  const tenant = storeTenant(tenantId);
  switch (path as Revoking) {
    case 'clients':
      if (after === null) return revokeDeletedClient(store, tenant, before.clientId as string);
      return takenAway(before, after) ? revokeClientArtefacts(store, tenant, before.clientId as string) : 0;
    case 'subjects':
      if (after !== null && after.subjectId === before.subjectId) return 0;
      await logoutNotices?.(tenantId, before.subjectId as string);
      return revokeDeletedSubject(store, tenant, before.subjectId as string);
    case 'identity-providers':
      return takenAway(before, after) ? revokeIdentityProviderArtefacts(store, tenant, before.id) : 0;
    default:
      return 0;
  }
}

/** A record deleted, or disabled by this change (enabling it again revives nothing). */
function takenAway(before: StoredRecord, after: StoredRecord | null): boolean {
  return after === null || (after.enabled === false && before.enabled !== false);
}

/**
 * POST /clients/{clientId}/revoke-tokens and POST /subjects/{id}/revoke-tokens: every grant,
 * code and token of the client (for every user), or of the subject (at every client, its
 * sessions too), deleted; the record stays as it is. 200 `{"revoked": n}`, 404 for no record.
 */
export function tokenRevocationRoutes(
  router: Router,
  store: Store,
  tenantOf: (ctx: AdminContext) => string | null,
  logoutNotices?: LogoutNotifier,
  changed?: (change: AdminChange) => Promise<unknown>,
): void {
  router.post('/clients/:key/revoke-tokens', async (ctx) => {
    const tenantId = tenantOf(ctx);
    const client = await clientRecords(store, storeTenant(tenantId)).findOne({ clientId: ctx.params.key! });
    if (!client) throw notFound(`no clients record ${JSON.stringify(ctx.params.key)}${inTenant(tenantId)}`);
    auditFactsOf(ctx.state).clientId = client.clientId as string;
    const revoked = await revokeClientArtefacts(store, storeTenant(tenantId), client.clientId as string);
    await changed?.({ kind: 'revoke-tokens', tenant: storeTenant(tenantId), clientId: client.clientId as string });
    ctx.body = { revoked };
  });
  router.post('/subjects/:key/revoke-tokens', async (ctx) => {
    const tenantId = tenantOf(ctx);
    const key = ctx.params.key!;
    const subject = /^\d{1,15}$/.test(key) ? await subjectRecords(store, storeTenant(tenantId)).get(Number(key)) : null;
    if (!subject) throw notFound(`no subjects record ${JSON.stringify(key)}${inTenant(tenantId)}`);
    auditFactsOf(ctx.state).subjectId = subject.subjectId as string;
    const told = await logoutNotices?.(tenantId, subject.subjectId as string);
    if (told)
      auditFactsOf(ctx.state).result = {
        logoutTokensDelivered: String(told.delivered),
        logoutTokensFailed: String(told.failed),
        // Of the failed: those the outbox delivers later (the rest are lost, and only logged).
        logoutTokensKept: String(told.kept),
      };
    const revoked = await revokeSubjectArtefacts(store, storeTenant(tenantId), subject.subjectId as string);
    await changed?.({ kind: 'revoke-tokens', tenant: storeTenant(tenantId), subject });
    ctx.body = told ? { revoked, logoutTokens: told } : { revoked };
  });
}

function inTenant(tenantId: string | null): string {
  return tenantId ? ` in tenant ${tenantId}` : '';
}
