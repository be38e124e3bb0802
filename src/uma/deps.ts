import type { InputParties, PolicyEngine } from '../policy/index.js';
import type { Store } from '../store/index.js';
import type { ParameterizedContext } from 'koa';
import type { AuditState } from '../audit/index.js';
import type { TenantState } from '../tenancy/index.js';

/** What the UMA routes (./registration.ts, ./permission.ts) are built with; ./router.ts hands it to each. */
export interface UmaDeps {
  store: Store;
  policy: PolicyEngine;
  /** Authenticates the PAT (src/oauth provides it). */
  callers: TokenCallers;
  parties: InputParties;
  issuer: string;
  maxBodyBytes: number;
  /** Lifetime of a permission ticket (spec: 5 minutes). */
  ticketSeconds: number;
  /** UMA_RESOURCES_PER_OWNER. */
  resourcesPerOwner: number;
  /** A resource was deleted: what was given of it goes too (the delegations of src/delegation). */
  resourceDeleted: (tenant: string, resourceId: string) => Promise<unknown>;
}

/**
 * What Arbiter's protected APIs (UMA, delegation, AuthZEN) read of `ctx.state`: the request's
 * tenant and its audit entry. They declare the callers they need below; src/oauth provides them.
 */
export type ApiState = TenantState & AuditState;
export type ApiContext = ParameterizedContext<ApiState>;

/** Who calls a protected API of this server with one of its access tokens (RFC 6750). */
export interface TokenCaller {
  /** The client the token was issued to. */
  clientId: string;
  /** The user the token stands for; null for a client's own token (client_credentials). */
  sub: string | null;
  scopes: string[];
}

export interface TokenRequirement {
  /** The scope the API needs; where several are listed, any one of them will do. */
  scope: string | readonly string[];
  /**
   * The API's own resource indicator (urn:as:…). A token issued for a resource server must have
   * been issued for this API or for this server (its issuer): one issued for another resource
   * server is refused, which could otherwise call the API with a token handed to it (RFC 8707 §2).
   * A token issued for no resource server is taken, unless `audienceRequired`.
   */
  audience?: string;
  /** The token must have been issued for `audience` (UMA's protection API token: spec, Authentication rule 3). */
  audienceRequired?: boolean;
  /**
   * A token without the scope (or for another audience) is 403 insufficient_scope (RFC 6750
   * §3.1); `invalid_token` makes it a 401 like an inactive one, as /introspect answers.
   */
  lackingScope?: 'insufficient_scope' | 'invalid_token';
}

/** Authenticates the Bearer caller of a protected API of this tenant. */
export type TokenCallers = (ctx: ApiContext, requirement: TokenRequirement) => Promise<TokenCaller>;

/** A client that authenticated with its own credentials (not a token) at one of Arbiter's APIs. */
export interface ClientCaller {
  clientId: string;
  method: 'client_secret_basic';
}

/** Authenticates `Authorization: Basic` client credentials of the request's tenant; undefined when the header is not Basic. */
export type ClientCallers = (ctx: ApiContext) => Promise<ClientCaller | undefined>;
