/**
 * Scope → claims of the spec's UserInfo table; the only claims Arbiter ever releases about a
 * person. `acr` rides with `openid`: it is not a fact about the person but about the sign-in
 * (the upstream provider's Authentication Context Class Reference, kept on the session), and
 * under `openid` oidc-provider puts it in every ID token whose sign-in has one, without a fixed
 * list of `acrValues` (the upstream's values are not known in advance).
 */
export const claims = {
  openid: ['sub', 'acr'],
  profile: ['name', 'preferred_username'],
  email: ['email', 'email_verified'],
};

export const scopes = ['openid', 'profile', 'email'];

/** Discovery's claims_supported: exactly the spec's list (oidc-provider would add sid, auth_time, iss). */
export const claimsSupported = ['sub', 'name', 'email', 'preferred_username', 'email_verified'];

/** The scopes whose claims include `claim` (OIDC Core §5.4): what a `claims` request for it asks to be granted. */
export function scopesCarrying(claim: string): string[] {
  return Object.entries(claims)
    .filter(([, carried]) => carried.includes(claim))
    .map(([scope]) => scope);
}

/** Every claim the scopes carry. */
export function claimsOf(scopes: Iterable<string>): Set<string> {
  const carried = new Set<string>();
  for (const scope of scopes) {
    if (Object.hasOwn(claims, scope)) for (const claim of claims[scope as keyof typeof claims]) carried.add(claim);
  }
  return carried;
}
