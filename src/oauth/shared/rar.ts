import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';
import type Provider from 'oidc-provider';
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';
import type { ConfigurationSlice } from '../context.js';
import { decisionOf } from '../token/grants/decision.js';
import { authorizationDetailsTypes } from '../internals.js';
import type { Tenant } from '../../tenancy/index.js';

/** Type validation is the policy's (unknown types are denied with invalid_authorization_details). */
const ANY_STRUCTURE = { validate: () => undefined };

/**
 * RFC 9396 through oidc-provider: the authorization details a code or token carries are
 * those the policy granted; the accepted types are the ones policy data defines (synced
 * into oidc-provider by `syncAuthorizationDetailsTypes`).
 */
export const richAuthorizationRequests: ConfigurationSlice = () =>
  ({
    features: {
      richAuthorizationRequests: {
        enabled: true,
        types: {},
        authorizationDetailsForGrantSource: (ctx: KoaContextWithOIDC, source: Carrier) =>
          decisionOf(ctx)?.authorization_details ?? source.rar ?? [],
        authorizationDetailsForAccessToken: (ctx: KoaContextWithOIDC, _token: unknown, source?: Carrier) =>
          decisionOf(ctx)?.authorization_details ?? source?.rar ?? [],
        authorizationDetailsForIntrospection: (_ctx: KoaContextWithOIDC, token: Carrier) => token.rar ?? [],
      },
    },
  }) as Configuration;

/** A code, grant or token: whatever carries authorization details. */
type Carrier = { rar?: unknown[] };

/**
 * A request with authorization_details and no resource indicator (the spec makes them
 * exclusive) gets this server as its audience: oidc-provider binds RAR tokens to a resource.
 * A token request that names none of the several resources of its code or refresh token
 * (`oneOf`) gets no default: the list is handed back, which oidc-provider refuses as
 * invalid_target (RFC 8707 §2.2; the token gate refuses it before this is reached).
 */
export function defaultResourceForDetails(issuer: string) {
  return async (ctx: { oidc: { params?: Record<string, unknown> } }, _client?: unknown, oneOf?: string[]) =>
    oneOf ?? (ctx.oidc.params?.authorization_details ? issuer : undefined);
}

/** Keeps oidc-provider's accepted RAR types equal to the types in the bundled policy data (at /authorize and /token). */
export function syncAuthorizationDetailsTypes(
  providerFor: (tenant: Tenant) => Provider,
  currentTypes: () => Promise<string[]>,
) {
  return async (ctx: ArbiterContext, next: Next): Promise<void> => {
    const types = authorizationDetailsTypes(providerFor(ctx.state.tenant));
    const wanted = new Set(await currentTypes());
    for (const type of Object.keys(types)) if (!wanted.has(type)) delete types[type];
    for (const type of wanted) types[type] ??= ANY_STRUCTURE;
    await next();
  };
}
