import type { ArbiterContext } from '../state.js';

/** RFC 9701 §4: the media type a resource server asks for (Accept) and gets a JWT response with. */
export const INTROSPECTION_JWT_TYPE = 'application/token-introspection+jwt';

/**
 * Whether the caller asked for a JWT introspection response: its Accept header prefers the JWT
 * media type to JSON (as oidc-provider negotiates it); no Accept, or `* / *`, is JSON (RFC 7662).
 */
export function answersWithJwt(ctx: Pick<ArbiterContext, 'accepts'>): boolean {
  return ctx.accepts('json', INTROSPECTION_JWT_TYPE) === INTROSPECTION_JWT_TYPE;
}
