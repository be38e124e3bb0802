import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { createOutbound, type Outbound, type OutboundOptions } from '../../../../http/outbound.js';
import { speaksFor } from '../../../shared/subject-issuer.js';
import { narrowedScopes } from '../decision.js';
import type { GateDeps } from '../gate.js';
import type { GrantHandler } from '../handler.js';
import { issueAccessToken } from '../issue.js';
import { accessTokenFormatOf } from '../../jwt-access-tokens.js';
import { assertKeyHeld, assertProofWhereObliged, heldKeys, issuedBinding, type SenderDeps } from '../sender-binding.js';
import { resolveAccessToken } from './access-token.js';
import { decideExchange } from './decision.js';
import { IdTokenSubjects } from './id-token.js';
import { ACCESS_TOKEN_TYPE, exchangeParameters, TOKEN_EXCHANGE, TOKEN_EXCHANGE_PARAMETERS } from './parameters.js';
import type { ResolvedSubject } from './subject.js';

export { TOKEN_EXCHANGE } from './parameters.js';

export interface TokenExchangeDeps extends GateDeps, SenderDeps {
  /** How the issuer JWKS of ID-token subjects is fetched (the OUTBOUND_* configuration). */
  outbound: OutboundOptions;
}

/**
 * RFC 8693 token exchange at /token: confidential clients trade an access token of this server,
 * or an ID token of a trusted external issuer, for a narrower access token. Parameters, then
 * the subject token (looked up, or verified against its issuer's JWKS) and its key binding,
 * then the `token_exchange` decision, then issuance (no refresh token, ever; bound to the DPoP
 * proof's key when the request carries one, and to the client certificate for a client registered
 * for certificate-bound tokens: sender-binding.ts).
 */
export function tokenExchangeGrant(provider: Provider, deps: TokenExchangeDeps): GrantHandler {
  let outbound: Outbound | undefined;
  const idTokens = new IdTokenSubjects(deps.policy, () => (outbound ??= createOutbound(deps.outbound)));
  return {
    grantType: TOKEN_EXCHANGE,
    parameters: TOKEN_EXCHANGE_PARAMETERS,
    async handle(ctx: KoaContextWithOIDC): Promise<void> {
      const client = ctx.oidc.client!;
      if (client.clientAuthMethod === 'none') {
        throw new errors.UnauthorizedClient(
          'token exchange requires a confidential client; public clients are refused',
        );
      }
      const exchange = exchangeParameters(ctx);
      const held = await heldKeys(provider, ctx, deps);
      const resolve = (token: string, type: string, role: 'subject' | 'actor'): Promise<ResolvedSubject> =>
        type === ACCESS_TOKEN_TYPE
          ? resolveAccessToken(provider, deps.store, deps.tenant, token, role)
          : idTokens.resolve(token, client.clientId, (issuer, sub) => speaksFor(deps.store, deps.tenant, issuer, sub));
      const resolved = await resolve(exchange.subjectToken, exchange.subjectTokenType, 'subject');
      assertKeyHeld(resolved.binding, held, 'subject');
      const actor = exchange.actor ? await resolve(exchange.actor.token, exchange.actor.tokenType, 'actor') : null;
      if (actor) assertKeyHeld(actor.binding, held, 'actor');
      const { outcome, delegations } = await decideExchange(ctx, deps, exchange, resolved, actor);
      // RFC 8693 §4.1: a delegated token says who acts; a chain nests the earlier actors. Exchanged
      // again without an actor, it keeps its actor: it never becomes a plain token of its user.
      const act = actor ? actClaim(actor, resolved) : actOf(resolved);
      if (act) ctx.state.exchangeAct = act;
      // Never beyond the subject token, nor the actor's: it ends when either, or one they were
      // exchanged from, is revoked (the actor's user deleted, say).
      const restsOn = [...new Set([...(resolved.restsOn ?? []), ...(actor?.restsOn ?? [])])];
      if (restsOn.length) ctx.state.exchangedFrom = restsOn;
      // Another client's token, its user's delegation to this client the reason: it ends with them.
      if (delegations.length) ctx.state.exchangeDelegations = delegations;
      // An external issuer's word on who the user is: the token lives while it still speaks for them.
      if (resolved.subjectIssuer) ctx.state.subjectIssuer = resolved.subjectIssuer;
      const { decision } = outcome;
      assertProofWhereObliged([decision], held);
      const binding = issuedBinding(ctx, held, [resolved.binding, ...(actor ? [actor.binding] : [])]);
      const scopes = narrowedScopes(outcome.input.request.scopes, decision);
      // A proof binds the new token to its key (RFC 9449 §5): a bound subject token stays bound.
      const issued = await issueAccessToken(provider, ctx, {
        gty: TOKEN_EXCHANGE,
        sub: resolved.subject?.sub ?? null,
        scopes,
        resource: outcome.input.request.resource,
        binding,
        // RFC 8693 §2.1 with the spec: never more than the subject token, its lifetime included, nor the actor's.
        notAfter: earliestExpiry([resolved, actor]),
        format: outcome.input.request.resource
          ? await accessTokenFormatOf(deps.store, deps.tenant, outcome.input.request.resource)
          : 'opaque',
      });
      ctx.body = {
        access_token: issued.value,
        issued_token_type: exchange.requestedTokenType,
        token_type: issued.tokenType,
        expires_in: issued.expiresIn,
        ...(issued.scope ? { scope: issued.scope } : {}),
        ...(decision.authorization_details?.length ? { authorization_details: decision.authorization_details } : {}),
      };
    },
  };
}

/** The earliest expiry of the access tokens of this server among these (an ID token's is not Arbiter's to keep), or null. */
function earliestExpiry(tokens: (ResolvedSubject | null)[]): number | null {
  const expiries = tokens.flatMap((each) =>
    each?.token.token_type === ACCESS_TOKEN_TYPE && typeof each.token.exp === 'number' ? [each.token.exp] : [],
  );
  return expiries.length ? Math.min(...expiries) : null;
}

/** The subject token's own `act` (a delegated token's), if it has one. */
function actOf(subject: ResolvedSubject): Record<string, unknown> | undefined {
  const { act } = subject.token;
  return typeof act === 'object' && act !== null && !Array.isArray(act) ? (act as Record<string, unknown>) : undefined;
}

/** The `act` claim of the issued token: the actor (its user, else its client), with the subject token's own `act` nested. */
function actClaim(actor: ResolvedSubject, subject: ResolvedSubject): Record<string, unknown> {
  const { sub, client_id: clientId, iss } = actor.token;
  const earlier = actOf(subject);
  return {
    sub: sub ?? clientId,
    ...(clientId ? { client_id: clientId } : {}),
    ...(iss ? { iss } : {}),
    ...(earlier ? { act: earlier } : {}),
  };
}
