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

/**
 * Every claim name of the `userinfo` and `id_token` members of a `claims` request (OIDC Core
 * §5.5): the parameter as sent (JSON text) or as a code or refresh token keeps it (parsed); [] for
 * an absent or unreadable one (oidc-provider refuses that).
 */
export function claimsNamed(claims: unknown): string[] {
  const parsed = typeof claims === 'string' ? parsedJson(claims) : claims;
  if (typeof parsed !== 'object' || parsed === null) return [];
  return [
    ...new Set(
      ['userinfo', 'id_token'].flatMap((member) => {
        const requested = (parsed as Record<string, unknown>)[member];
        return typeof requested === 'object' && requested !== null ? Object.keys(requested) : [];
      }),
    ),
  ];
}

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Claims about the authentication rather than the person, which oidc-provider releases when asked
 * for without a grant (its consent prompt skips them too): rejecting one would drop it.
 */
export const AUTHENTICATION_CLAIMS = new Set(['sub', 'sid', 'auth_time', 'acr', 'amr', 'iss']);

/** Every claim the scopes carry. */
export function claimsOf(scopes: Iterable<string>): Set<string> {
  const carried = new Set<string>();
  for (const scope of scopes) {
    if (Object.hasOwn(claims, scope)) for (const claim of claims[scope as keyof typeof claims]) carried.add(claim);
  }
  return carried;
}
