/** Scope → claims of the spec's UserInfo table; the only claims Arbiter ever releases. */
export const claims = {
  openid: ['sub'],
  profile: ['name', 'preferred_username'],
  email: ['email', 'email_verified'],
};

export const scopes = ['openid', 'profile', 'email'];
