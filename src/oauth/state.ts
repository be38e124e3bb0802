import type { Middleware, ParameterizedContext } from 'koa';
import type { AuditState } from '../audit/index.js';
import type { Decision } from '../policy/index.js';
import type { TenantState } from '../tenancy/index.js';

/*
 * The OAuth edge's part of Koa's `ctx.state`, declared here rather than beside the endpoints that
 * fill it, so that every endpoint can import it without importing the others (no import circles).
 * oidc-provider's contexts carry the same object, untyped.
 */
export type OAuthState = {
  /**
   * /authorize and /par: the parameters of the request object or pushed request the request
   * carries, as decided on instead of the query's (authorize/request-object.ts); null when it
   * carries one that cannot be read; absent for a plain request.
   */
  requestObject?: Record<string, unknown> | null;
  /** What the policy said about this request, for oidc-provider's later hooks (token/grants/decision.ts). */
  policyDecision?: Decision;
  /** Token exchange with an actor: the issued token's `act` claim (token/shaping.ts). */
  exchangeAct?: Record<string, unknown>;
  /** A code or refresh token whose authorization named claims: the granted scopes that carry them (CLAIM_SCOPES). */
  claimScopes?: string[];
  /** Token exchange of an access token: the stored tokens the issued one lives by (EXCHANGED_FROM). */
  exchangedFrom?: string[];
  /** Token exchange of another client's token that its user delegated to this client: the delegations it rests on (DELEGATION_IDS). */
  exchangeDelegations?: string[];
  /** Token exchange of an external ID token (or of a token exchanged from one): its issuer (SUBJECT_ISSUER). */
  subjectIssuer?: string;
  /** /authorize and /par: the client sent PKCE `plain`, which authorize/pkce-plain.ts turned into S256 (FAPI 2.0 refuses it). */
  pkcePlain?: true;
  /** The UMA grant: what the requesting party token permits (token/shaping.ts). */
  umaPermissions?: RptPermission[];
};

/** What the OAuth edge's steps read and write: the layers below it (a tenant, the audit entry, the request's own) and its own part. */
export type OAuthRequestState = TenantState & AuditState & OAuthState;

/**
 * The `extra` member an exchanged token keeps server-side (token/shaping.ts): the store ids of its
 * subject token and of the tokens that one was exchanged from, in turn. It is found only while all
 * of them are (owned-artefacts.ts): revoking a token, its grant, client or user ends every token
 * exchanged from it. Never in a JWT access token, never shown at introspection.
 */
export const EXCHANGED_FROM = 'exchanged_from';

/**
 * The `extra` member of a token exchanged from another client's token because its user delegated
 * to the exchanging client (/delegation): the ids of those delegations. The token is found only
 * while one of them is active (owned-artefacts.ts), as a requesting party token's delegated
 * permission is; so is every token exchanged from it in turn. Never in a JWT, never shown.
 */
export const DELEGATION_IDS = 'delegation_ids';

/**
 * The `extra` member of a token exchanged from an external issuer's ID token (and of every token
 * exchanged from it in turn): that issuer. The token is found only while the issuer may speak for
 * its user (owned-artefacts.ts, subject-issuer.ts): found 2026-11-29, a token exchanged for a `sub`
 * no user had yet stood for whoever signed in with that `sub` later, through another provider.
 * Never in a JWT, never shown.
 */
export const SUBJECT_ISSUER = 'subject_issuer';

/**
 * The `extra` member of an access token issued for a code or refresh token whose authorization's
 * `claims` request (OIDC Core §5.5) named claims: the scopes the token decision granted that carry
 * them. The token releases a named claim (ID token, UserInfo) only under its own scopes or these
 * (userinfo/accounts.ts), so a decision that no longer grants a scope withholds its claims from
 * then on, while tokens issued before keep what they were issued with. Never in a JWT access token.
 */
export const CLAIM_SCOPES = 'claim_scopes';

/** A token as oidc-provider's models expose it (its claims are untyped there). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type TokenModel = Record<string, any> & { kind: string; isValid: boolean };

/** One permission of a requesting party token (UMA 2.0 Grant §3.3.5, shown at introspection). */
export interface RptPermission {
  resource_id: string;
  resource_scopes: string[];
  /** When this permission ends; absent: with the token. */
  exp?: number;
  /**
   * The delegations it rests on (the party does not own the resource): it lasts while one of them
   * is active (owned-artefacts.ts). Kept server-side, never shown at introspection.
   */
  delegation_ids?: string[];
}

/** The context of the OAuth edge's steps (the whole server's is src/state.ts's, which adds nothing they read). */
export type ArbiterContext = ParameterizedContext<OAuthRequestState>;
export type ArbiterMiddleware = Middleware<OAuthRequestState>;
