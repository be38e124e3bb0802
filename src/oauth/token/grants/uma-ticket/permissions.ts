import type Provider from 'oidc-provider';
import { errors } from 'oidc-provider';
import { activeAccessToken } from '../../../shared/callers.js';
import type { RptPermission } from '../../../state.js';
import { assertKeyHeld, bindingOf, type HeldKeys } from '../sender-binding.js';

/** The permissions an RPT carries (kept server-side in its `extra`). */
export function permissionsOf(token: { extra?: unknown; exp?: unknown }): RptPermission[] {
  const permissions = (token.extra as { permissions?: unknown } | undefined)?.permissions;
  return Array.isArray(permissions) ? (permissions as RptPermission[]) : [];
}

/** The permissions still in force, each with its end, for the introspection response (what they rest on stays on the server). */
export function permissionsInForce(
  token: { extra?: unknown; exp?: unknown },
  now = Math.floor(Date.now() / 1000),
): RptPermission[] {
  return stillInForce(token, now).map(({ delegation_ids: _kept, ...permission }) => permission as RptPermission);
}

/**
 * The permissions still in force, each with its end and the delegations it rests on: what an
 * upgraded RPT keeps. Found 2026-11-30: an upgrade kept them without their delegations, so a
 * permission lasted in the new RPT after its delegation was revoked (owned-artefacts.ts ends an
 * RPT with the delegations its permissions rest on).
 */
function stillInForce(token: { extra?: unknown; exp?: unknown }, now: number): RptPermission[] {
  const tokenExp = typeof token.exp === 'number' ? token.exp : undefined;
  return permissionsOf(token)
    .map((permission) => ({ ...permission, exp: permission.exp ?? tokenExp }))
    .filter((permission) => permission.exp === undefined || permission.exp > now);
}

/**
 * UMA 2.0 Grant §3.3.1 `rpt`: the client's current RPT, whose permissions in force the new one
 * keeps (each until its own end). Another client's token, a token that is not an active RPT, or
 * one of another requesting party (`party`: the new RPT's subject, null for the client alone) is
 * invalid_grant: one party's permissions never ride in another's token. A bound RPT needs a proof
 * of its key or its certificate.
 */
export async function upgradedPermissions(
  provider: Provider,
  value: string,
  clientId: string,
  party: string | null,
  held: HeldKeys,
): Promise<RptPermission[]> {
  const token = await activeAccessToken(provider, value);
  if (!token || token.clientId !== clientId || permissionsOf(token).length === 0) {
    throw new errors.CustomOIDCProviderError(
      'invalid_grant',
      'rpt is not an active requesting party token of this client',
    );
  }
  if ((token.accountId ?? null) !== party)
    throw new errors.CustomOIDCProviderError('invalid_grant', 'rpt was issued to another requesting party');
  assertKeyHeld(bindingOf(token), held, 'rpt');
  return stillInForce(token, Math.floor(Date.now() / 1000));
}

/** The new permissions, plus the upgraded RPT's on other resources (a resource granted anew takes the new grant). */
export function mergedPermissions(granted: RptPermission[], kept: RptPermission[]): RptPermission[] {
  const renewed = new Set(granted.map((permission) => permission.resource_id));
  return [...granted, ...kept.filter((permission) => !renewed.has(permission.resource_id))];
}
