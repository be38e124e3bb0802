import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';
import type { ConfigurationSlice } from '../context.js';
import { decisionOf } from '../token/grants/decision.js';

/** Type validation is the policy's (unknown types are denied with invalid_authorization_details). */
const ANY_STRUCTURE = { validate: () => undefined };

/**
 * RFC 9396 through oidc-provider: the authorization details a code or token carries are
 * those the policy granted; the accepted types are the ones policy data defines, as of the
 * policy revision the provider is built for (providers.ts builds a tenant's provider again when
 * the revision moves on). Every client may ask for every type: the policy decides per client
 * (internals.ts, `everyClientMayAskForEveryType`).
 */
export const richAuthorizationRequests: ConfigurationSlice = ({ vocabulary }) =>
  ({
    features: {
      richAuthorizationRequests: {
        enabled: true,
        types: Object.fromEntries(vocabulary.authorizationDetailsTypes.map((type) => [type, ANY_STRUCTURE])),
        authorizationDetailsForGrantSource: (ctx: KoaContextWithOIDC, source: Carrier) => grantedDetails(ctx, source),
        authorizationDetailsForAccessToken: (ctx: KoaContextWithOIDC, _token: unknown, source?: Carrier) =>
          grantedDetails(ctx, source),
        authorizationDetailsForIntrospection: (_ctx: KoaContextWithOIDC, token: Carrier) => token.rar ?? [],
      },
    },
  }) as Configuration;

/** A code, grant or token: whatever carries authorization details. */
type Carrier = { rar?: unknown[] };

/**
 * The details a decision granted: none where it names none, as a decision that names no scopes
 * grants none (found 2026-11-30: a token decision without `authorization_details`, as every
 * decision Cedar makes alone, got the code's or refresh token's details). Without a decision,
 * what the source carries.
 */
function grantedDetails(ctx: KoaContextWithOIDC, source: Carrier | undefined): unknown[] {
  const decision = decisionOf(ctx);
  return decision ? (decision.authorization_details ?? []) : (source?.rar ?? []);
}

/**
 * The authorization details an issued token carries: those its decision granted, kept in its
 * `extra` (token/shaping.ts), else oidc-provider's own `rar`. What introspection shows and what a
 * token exchange may ask for at most.
 */
export function carriedDetails(token: object): unknown[] {
  const { extra, rar } = token as { extra?: { authorization_details?: unknown[] }; rar?: unknown };
  return extra?.authorization_details ?? (Array.isArray(rar) ? rar : []);
}

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
