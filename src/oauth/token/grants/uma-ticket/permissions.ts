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

/** The permissions still in force, each with its end, for the introspection response. */
export function permissionsInForce(
  token: { extra?: unknown; exp?: unknown },
  now = Math.floor(Date.now() / 1000),
): RptPermission[] {
  const tokenExp = typeof token.exp === 'number' ? token.exp : undefined;
  return permissionsOf(token)
    .map((permission) => ({ ...permission, exp: permission.exp ?? tokenExp }))
    .filter((permission) => permission.exp === undefined || permission.exp > now) as RptPermission[];
}

/**
 * UMA 2.0 Grant §3.3.1 `rpt`: the client's current RPT, whose permissions in force the new one
 * keeps (each until its own end). Another client's token, or a token that is not an active RPT, is invalid_grant;
 * a bound RPT needs a proof of its key or its certificate.
 */
export async function upgradedPermissions(
  provider: Provider,
  value: string,
  clientId: string,
  held: HeldKeys,
): Promise<RptPermission[]> {
  const token = await activeAccessToken(provider, value);
  if (!token || token.clientId !== clientId || permissionsOf(token).length === 0) {
    throw new errors.CustomOIDCProviderError(
      'invalid_grant',
      'rpt is not an active requesting party token of this client',
    );
  }
  assertKeyHeld(bindingOf(token), held, 'rpt');
  return permissionsInForce(token);
}

/** The new permissions, plus the upgraded RPT's on other resources (a resource granted anew takes the new grant). */
export function mergedPermissions(granted: RptPermission[], kept: RptPermission[]): RptPermission[] {
  const renewed = new Set(granted.map((permission) => permission.resource_id));
  return [...granted, ...kept.filter((permission) => !renewed.has(permission.resource_id))];
}
