/** The spec's endpoint paths (discovery table), as oidc-provider `routes`. */
export const routes = {
  authorization: '/authorize',
  token: '/token',
  registration: '/register',
  jwks: '/.well-known/jwks.json',
  userinfo: '/userinfo',
  introspection: '/introspect',
  end_session: '/session/end',
  revocation: '/revoke',
};

/** Endpoints served by Arbiter's own routers but advertised in discovery. */
export const extraEndpoints = {
  resource_registration_endpoint: '/resource_registration/resource',
  permission_endpoint: '/permission',
};
