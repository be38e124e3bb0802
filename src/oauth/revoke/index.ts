import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import { errors, type KoaContextWithOIDC } from 'oidc-provider';
import type { AuditFacts, AuditState } from '../../audit/index.js';
import { assertRegisteredAuthMethod } from '../clients/auth-method.js';
import type { ConfigurationSlice } from '../context.js';
import { routes } from '../routes.js';
import { guardClientCredentials, requireClientCredential } from '../shared/credential-guard.js';
import { formBody } from '../shared/form-body.js';
import type { ArbiterContext, ArbiterMiddleware, TokenModel } from '../state.js';
import { standInForJwtAccessTokens } from '../token/jwt-access-tokens.js';
import type { Tenant } from '../../tenancy/index.js';

export const REVOKE_PATH = routes.revocation;

export interface RevokeDeps {
  issuer: string;
  maxBodyBytes: number;
  providerFor(tenant: Tenant): Provider;
}

/**
 * What Arbiter adds at /revoke (RFC 7009) in front of oidc-provider, in order, as at /token: the
 * form read with the size limit, a request presenting no client at all refused (401), a client
 * that failed too often refused before its credentials are verified, and what was revoked told to
 * the audit entry. oidc-provider then authenticates the client (Basic, post, private_key_jwt, or
 * a public client's client_id), requires `token` (400 invalid_request), looks it up by
 * `token_type_hint` first and then as every other kind (RFC 7009 §2.1: the hint may be wrong),
 * answers 200 with an empty body whether or not it found one (§2.2), and asks `revocationPolicy`
 * before it revokes.
 */
export function revokeMiddleware({ issuer, maxBodyBytes, providerFor }: RevokeDeps): ArbiterMiddleware[] {
  return [
    formBody(maxBodyBytes),
    requireClientCredential({ issuer, publicClients: true, bearer: false }),
    guardClientCredentials,
    auditUnknownToken,
    standInForJwtAccessTokens(providerFor),
  ];
}

/**
 * oidc-provider's revocation hook, called once the client is authenticated and the token found.
 *
 * No policy decision is asked: revoking takes authority away and grants none. RFC 7009 §2.1 leaves
 * the server two checks, both made here (the client's credentials, and that the token was issued
 * to it), and a policy that could refuse would keep alive a token its own client wants ended
 * (logout, a leaked token). The policy decided when the token was issued; ending it early needs no
 * second decision.
 *
 * Another client's token is not revoked. §2.1 says the request "is refused and the client is
 * informed of the error": an authenticated (confidential) client gets 400 `unauthorized_client`,
 * RFC 6749 §5.2's code for an authenticated client not authorized to do what it asked (the request
 * is well formed, so not oidc-provider's default invalid_request). A public client has authenticated nothing
 * (its client_id is public): it gets the 200 of an unknown token, so that nobody learns from this
 * endpoint whether a value is a live token of someone else's (RFC 7009 §5 on guessing tokens).
 *
 * Revoking a refresh token ends every token of its grant and the grant (§2.1: SHOULD); revoking an
 * access token ends the other tokens of its grant too and keeps the grant (§2.1: MAY): oidc-provider's
 * revocation and revokeGrantPolicy, through the store adapter's revokeByGrantId (adapters/oidc).
 * A client_credentials token has no grant: it alone ends.
 */
export const revocationPolicy: ConfigurationSlice = () => ({
  features: {
    revocation: {
      enabled: true,
      async allowedPolicy(ctx, client, token) {
        // Only reached for a token that exists: an unknown one is a 200 that changes nothing whatever the method.
        assertRegisteredAuthMethod(ctx);
        const model = token as unknown as TokenModel;
        const own = model.clientId === client.clientId;
        recordRevocation(ctx, model, own);
        if (own) return true;
        if (client.clientAuthMethod === 'none') return false;
        throw new errors.UnauthorizedClient(
          'the token was not issued to this client: only its own client may revoke it',
        );
      },
    },
  },
});

/** Token kinds as RFC 7009 §2.1 `token_type_hint` names them (a client_credentials token is an access token). */
const HINT_OF_KIND: Record<string, string> = {
  AccessToken: 'access_token',
  ClientCredentials: 'access_token',
  RefreshToken: 'refresh_token',
};

/** The audit entry says which kind of token, whose, and whether it was revoked: never the token's value. */
function recordRevocation(ctx: KoaContextWithOIDC, token: TokenModel, own: boolean): void {
  // oidc-provider's contexts carry Arbiter's state untyped: read as the audit log's part of it.
  const { audit }: AuditState = ctx.state;
  if (!audit) return;
  audit.subjectId = token.accountId ?? null;
  audit.outcome = own ? 'allow' : 'deny';
  audit.result = {
    token_type: HINT_OF_KIND[token.kind] ?? token.kind,
    token_client_id: token.clientId ?? null,
    revoked: own,
    ...(own && token.grantId && token.kind !== 'ClientCredentials' ? { grant_tokens_revoked: true } : {}),
    ...(own ? {} : { reason: 'the token was issued to another client' }),
  } satisfies AuditFacts['result'];
}

/** A 200 with nothing recorded: no live token of this tenant has the value (or it is not a revocable kind). */
async function auditUnknownToken(ctx: ArbiterContext, next: Next): Promise<void> {
  await next();
  const { audit } = ctx.state;
  if (ctx.method === 'POST' && ctx.status === 200 && audit && !audit.result) {
    audit.result = { revoked: false, reason: 'no active token of this tenant has this value' };
  }
}
