import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { assertRegisteredAuthMethod } from '../../clients/auth-method.js';

/**
 * One grant type at /token, as ORY Fosite has one handler per grant: the parameters it takes
 * and how it answers. Arbiter's grants (client_credentials, authorization_code, refresh_token,
 * token exchange and the UMA ticket grant) are each one of these, registered with
 * oidc-provider's public `registerGrantType`; oidc-provider authenticates the client and
 * dispatches by grant_type.
 */
export interface GrantHandler {
  grantType: string;
  /** Every form parameter the grant reads (oidc-provider passes only these on). */
  parameters: string[];
  /** The parameters that may be given more than once (as a list); oidc-provider refuses any other repeated one. */
  repeatable?: readonly string[];
  /** Answers the token request (ctx.body), or throws an OAuth error. */
  handle(ctx: KoaContextWithOIDC): Promise<void>;
}

export function registerGrantHandlers(provider: Provider, handlers: GrantHandler[]): void {
  for (const handler of handlers) {
    const answer = async (ctx: KoaContextWithOIDC) => {
      assertRegisteredAuthMethod(ctx);
      await handler.handle(ctx);
      omitEmptyScope(ctx);
    };
    provider.registerGrantType(handler.grantType, answer, handler.parameters, [...(handler.repeatable ?? [])]);
  }
}

/**
 * RFC 6749 §3.3 and §5.1: a `scope` holds at least one scope token. A token granted none (for a
 * resource server the policy offers no scope of those asked, as a sign-in's `openid profile`
 * asked of an API) has no scope to list: the member is left out rather than sent empty.
 * oidc-provider sends it empty when the code or refresh token held scopes the token does not.
 * Where nothing granted means the request cannot succeed (a refresh asking for scopes the policy
 * grants none of), the grant has already refused it with invalid_scope (gate.ts).
 */
function omitEmptyScope(ctx: KoaContextWithOIDC): void {
  const body = ctx.body as Record<string, unknown> | undefined;
  if (typeof body === 'object' && body !== null && body.scope === '') delete body.scope;
}
