import type { ArbiterContext } from '../state.js';
import type Provider from 'oidc-provider';
import { markAuthenticated } from '../../audit/index.js';
import { clientIdentity, credentialWasRight, guardCredential } from '../../http/auth-failures.js';
import { basicCredentials, invalidClient } from '../../http/basic.js';
import { insufficientScope, invalidDpop, invalidToken, presentedAccessToken } from '../../http/bearer.js';
import { isUnavailable } from '../../http/errors.js';
import type { Sealer, Store } from '../../store/index.js';
import { clientsCollection } from '../clients/records.js';
import { withTenantHint } from './tenant-hint.js';
import { clientSecretUsed } from '../clients/secrets.js';
import { findTokenByValue, verifiedResourceProof } from '../internals.js';
import { looksLikeJwtAccessToken } from '../token/jwt-access-tokens.js';
import { holdsBoundCertificate, type MtlsSettings } from '../mtls/index.js';
import { issuersOfTenant, type Tenant } from '../../tenancy/index.js';
import type { ClientCaller, ClientCallers, TokenCaller, TokenCallers, TokenRequirement } from '../../uma/index.js';

export type { ClientCaller, ClientCallers, TokenCaller, TokenCallers, TokenRequirement };

/**
 * Who calls Arbiter's own APIs, and how they are authenticated: a Bearer access token of this
 * server (RFC 6750; UMA protection, delegation, AuthZEN, Bearer callers at /introspect), or a
 * client's own credentials in `Authorization: Basic` (AuthZEN). /token and /introspect's client
 * authentication is oidc-provider's (with the failure limit in front, credential-guard.ts).
 */

/** An opaque token of ours is short; anything longer is not one, and not worth a lookup (unless a JWT access token). */
const MAX_TOKEN_LENGTH = 512;

/**
 * The access token (or client-credentials token) of this tenant's provider with this value,
 * when it is active (not expired, not revoked); undefined otherwise. Refresh tokens and codes
 * never pass. The one lookup behind Bearer callers, token-exchange subjects and upgraded RPTs.
 */
export async function activeAccessToken(provider: Provider, value: string) {
  if (value.length > MAX_TOKEN_LENGTH && !looksLikeJwtAccessToken(value)) return undefined;
  // A value that is no token of ours fails its lookup: not active. A store that cannot answer is a
  // 503, never a 401 that would make the caller throw an active token away.
  const token = await findTokenByValue(provider, value, 'access_token').catch((error: unknown) => {
    if (isUnavailable(error)) throw error;
    return undefined;
  });
  if (
    !token ||
    (token.kind !== 'AccessToken' && token.kind !== 'ClientCredentials') ||
    !token.isValid ||
    token.isExpired
  )
    return undefined;
  return token;
}

/**
 * The one way Arbiter's own APIs accept its access tokens: a valid access token of the
 * request's tenant (each tenant's provider knows only its own tokens), presented as Bearer, or
 * as DPoP with a proof of its key when DPoP-bound (RFC 9449 §7.1; never as Bearer then),
 * presented with its client certificate if bound to one (RFC 8705 §3),
 * carrying the API's scope. No token, or not an active one: 401 invalid_token with the RFC 6750
 * challenge; an active token without the scope or for another audience: see `lackingScope`.
 */
export function tokenCallers(
  providerFor: (tenant: Tenant) => Provider,
  mtls: MtlsSettings,
  /** ISSUER: with the tenant's own (/t/<tenant>), the issuers an API's token may name (issuedForThisApi). */
  issuer: string,
): TokenCallers {
  return async (ctx, requirement) => {
    const presented = presentedAccessToken(ctx.get('authorization'));
    if (!presented) throw invalidToken(ctx, 'a Bearer or DPoP access token is required');
    const provider = providerFor(ctx.state.tenant);
    const token = await activeAccessToken(provider, presented.value);
    if (!token) throw invalidToken(ctx, 'the access token is not active');
    await assertPresentedAsBound(provider, ctx, token, presented);
    // RFC 8705 §3: a token bound to a client certificate is presented over a connection with that certificate.
    if (!holdsBoundCertificate(mtls, ctx.req, token))
      throw invalidToken(ctx, 'the access token is bound to a client certificate this request did not present');
    markAuthenticated(ctx.state);
    const scopes: string[] = typeof token.scope === 'string' ? token.scope.split(' ').filter(Boolean) : [];
    const accepted = [requirement.scope].flat();
    const issuers = issuersOfTenant(issuer, ctx.state.tenant);
    if (!scopes.some((scope) => accepted.includes(scope)) || !issuedForThisApi(token.aud, issuers, requirement))
      throw lackingScope(ctx, accepted, requirement);
    return {
      clientId: token.clientId as string,
      sub: typeof token.accountId === 'string' ? token.accountId : null,
      scopes,
    };
  };
}

/**
 * RFC 9449 §7: a DPoP-bound token is presented with the DPoP scheme and a proof of its key made
 * for this request (its method and URL, the token's `ath`), never as a Bearer token; a token that
 * is not DPoP-bound is no DPoP one either.
 */
async function assertPresentedAsBound(
  provider: Provider,
  ctx: ArbiterContext,
  token: { jkt?: string; clientId?: string },
  presented: { scheme: 'Bearer' | 'DPoP'; value: string },
): Promise<void> {
  if (presented.scheme === 'Bearer') {
    if (token.jkt)
      throw invalidToken(ctx, 'a DPoP-bound access token must be presented with its DPoP proof, not as a Bearer token');
    return;
  }
  // The challenge of the scheme this token is to come with: Bearer.
  if (!token.jkt) throw invalidToken(ctx, 'the access token is not DPoP-bound: present it as a Bearer token');
  // As oidc-provider names its own endpoints' URLs (its origin was pinned to this server's: dpop-origin.ts).
  const url = new URL(ctx.href);
  url.search = '';
  const proof = await verifiedResourceProof(provider, ctx, {
    accessToken: presented.value,
    clientId: token.clientId ?? '',
    url: url.href,
  }).catch((error: unknown) => {
    const refused = error as { error?: string; error_description?: string };
    if (refused.error === 'invalid_dpop_proof' || refused.error === 'use_dpop_nonce')
      throw invalidDpop(ctx, refused.error, refused.error_description ?? 'the DPoP proof is not valid');
    throw error;
  });
  if (!proof) throw invalidDpop(ctx, 'invalid_dpop_proof', 'a DPoP-bound access token needs a DPoP proof');
  if (proof.thumbprint !== token.jkt)
    throw invalidDpop(ctx, 'invalid_dpop_proof', "the DPoP proof's key is not the key the access token is bound to");
}

/**
 * Whether a token's audience lets it call the API: issued for the API's resource indicator or for
 * this server (its issuer; an authorization_details token is), or, unless the API requires its
 * own, for no resource server at all. Never one issued for another resource server, which holds
 * it and could otherwise call the API as the client, or as the user (RFC 8707 §2, RFC 9068 §4).
 */
function issuedForThisApi(aud: unknown, issuers: string[], { audience, audienceRequired }: TokenRequirement): boolean {
  const audiences = [aud].flat().filter((value): value is string => typeof value === 'string');
  if (audienceRequired) return audience !== undefined && audiences.includes(audience);
  return audiences.every((value) => value === audience || issuers.includes(value));
}

function lackingScope(
  ctx: ArbiterContext,
  accepted: string[],
  { audience, audienceRequired, lackingScope: answer }: TokenRequirement,
): Error {
  const target = audienceRequired
    ? ` issued for resource ${audience}`
    : ` issued for ${audience ? `resource ${audience}, ` : ''}this server or no resource server`;
  const description = `this API requires an access token with scope ${accepted.join(' or ')}${target}`;
  return answer === 'invalid_token'
    ? invalidToken(ctx, description)
    : insufficientScope(ctx, accepted.join(' '), description);
}

/**
 * client_secret_basic outside /token, checked against the stored BCrypt hash, behind the same
 * failure limit as /token. An unknown or disabled client, a public one, or a wrong secret are
 * all the same 401 invalid_client.
 */
export function clientCallers(store: Store, sealer: Sealer): ClientCallers {
  return async (ctx) => {
    const credentials = basicCredentials(ctx.get('authorization'));
    if (!credentials) return undefined;
    const { id: clientId, secret } = credentials;
    if (clientId) await guardCredential(ctx, clientIdentity(ctx.state.tenant.name, clientId));
    const record =
      clientId && secret ? await clientsCollection(store, ctx.state.tenant.name).findOne({ clientId }) : null;
    const usable = record?.enabled !== false && record?.clientType === 'confidential' ? record : null;
    if (
      !usable?.clientSecret ||
      secret!.length > 256 ||
      !(await clientSecretUsed({ store, sealer, tenant: ctx.state.tenant.name }, usable, secret!, ctx.state))
    )
      throw invalidClient(ctx, withTenantHint(ctx, 'client authentication failed'));
    credentialWasRight(ctx);
    return { clientId: clientId!, method: 'client_secret_basic' };
  };
}
