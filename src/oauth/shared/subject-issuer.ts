import { identityProviderRecords, subjectRecords } from '../../catalog/index.js';
import type { Store } from '../../store/index.js';

/**
 * The issuer of the identity provider through which the tenant's user `sub` signs in: null when the
 * user is bound to none (made through the Admin API, never signed in), undefined when there is no
 * such user.
 */
export async function issuerOfUser(store: Store, tenant: string, sub: string): Promise<string | null | undefined> {
  const user = await subjectRecords(store, tenant).findOne({ subjectId: sub });
  if (!user) return undefined;
  if (user.identityProviderId == null) return null;
  return (await identityProviderRecords(store, tenant).get(user.identityProviderId))?.issuer ?? null;
}

/**
 * Whether `issuer` may speak for the tenant's user `sub`: there is no such user, or they sign in
 * through a provider of that issuer. Issuers are compared as sign-in compares them (discovery,
 * oauth4webapi): as URLs, so `https://idp.example/` is `https://idp.example`.
 */
export async function speaksFor(store: Store, tenant: string, issuer: string, sub: string): Promise<boolean> {
  const local = await issuerOfUser(store, tenant, sub);
  return local === undefined || (local !== null && hrefOf(local) === hrefOf(issuer));
}

function hrefOf(issuer: string): string {
  return URL.parse(issuer)?.href ?? issuer;
}
