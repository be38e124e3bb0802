/** Scope → claims of the spec's UserInfo table; the only claims Arbiter ever releases. */
export const claims = {
  openid: ['sub'],
  profile: ['name', 'preferred_username'],
  email: ['email', 'email_verified'],
};

export const scopes = ['openid', 'profile', 'email'];

/** Discovery's claims_supported: exactly the spec's list (oidc-provider would add sid, auth_time, iss). */
export const claimsSupported = ['sub', 'name', 'email', 'preferred_username', 'email_verified'];
