/**
 * The decision contract between the protocol code and the policy engine.
 *
 * Protocol code builds a `DecisionInput` for one of the named decision points, asks
 * `PolicyEngine.decide`, and relays the `Decision`'s output claims; it never grants on its
 * own. docs/policy.md describes every field with one worked example per point, and
 * schemas.ts holds the matching JSON schemas (checked on every decision).
 */

export const DECISION_POINTS = [
  'authorize',
  'token',
  'token_exchange',
  'introspect',
  'register',
  'access_evaluation',
  'uma_permission',
  'delegation',
] as const;

export type DecisionPoint = (typeof DECISION_POINTS)[number];

/** An RFC 9396 authorization details object; `type` is a type URI known to policy data. */
export interface AuthorizationDetail {
  type: string;
  [field: string]: unknown;
}

/** One entitlement: scopes the client may obtain for tokens aimed at resources of `type`. */
export interface GrantedResource {
  type: string;
  scopes: string[];
}

/** The result of a decision. Output claims are only meaningful when `allow` is true. */
export interface Decision {
  allow: boolean;
  /** Scopes to grant; may be narrower than requested. Absent: the protocol grants none beyond what it must. */
  scopes?: string[];
  /** RFC 9396 objects to grant (relayed in token and introspection responses). */
  authorization_details?: unknown[];
  /** Policy-defined map relayed in introspection (and AuthZEN `context`). */
  obligations?: Record<string, unknown>;
  /** Extra output claims relayed in introspection (and registration entitlements, see docs). */
  extensions?: Record<string, unknown>;
  /** Marks the issued token single-use: deleted after its first successful introspection. */
  jit_single_use?: boolean;
  /** OAuth error code for a deny (e.g. invalid_scope, invalid_grant). */
  error?: string;
  error_description?: string;
}

/** The client making the request (for `register`: null, the client does not exist yet). */
export interface ClientInput {
  client_id: string;
  client_type: 'confidential' | 'public';
  /** How the client came to exist: Admin API, dynamic registration, or a client ID metadata document. */
  registration_type: 'admin' | 'dcr' | 'cimd';
  /** Scopes registered for the client (its `scope` metadata / Admin API `scopes`); may be empty. */
  scopes: string[];
  /**
   * Entitlements per resource type: the software statement's `granted_resources`, or for a CIMD
   * client `data.oauth.public_client_policy.cimd.granted_resources`; may be empty.
   */
  granted_resources: GrantedResource[];
  grant_types?: string[];
  redirect_uris?: string[];
  token_endpoint_auth_method?: string;
  software_id?: string | null;
  /** How the client authenticated on this request: client_secret_basic, client_secret_post, private_key_jwt, none, or bearer. */
  authenticated_with?: string | null;
}

/** The end user on whose behalf the request is made, when there is one. */
export interface SubjectInput {
  /** The OIDC `sub` the service issues. */
  sub: string;
  /** Key of the upstream identity provider the user signed in with. */
  idp?: string | null;
  /** Stored profile claims: name, email, email_verified, preferred_username. */
  claims?: Record<string, unknown>;
}

/** The request being decided. Every field is always present (empty/null when not applicable). */
export interface RequestInput {
  /** Path as received, e.g. "/token". */
  endpoint: string;
  /** HTTP method. */
  method: string;
  /** Request parameters (query, form or JSON body) with credentials removed (see request-input.ts). */
  parameters: Record<string, unknown>;
  /** The grant type at `token` and `token_exchange`; null elsewhere. */
  grant_type: string | null;
  /**
   * Scopes asked for: the `scope` parameter split on spaces; at `token` with grant_type
   * authorization_code, the scopes granted at /authorize (carried by the code).
   */
  scopes: string[];
  /** RFC 8707 resource indicator, or null. */
  resource: string | null;
  /** The resource type URI `resource` resolved to (resource-server lookup or the resource_type hint), or null. */
  resolved_resource_type: string | null;
  /** The `resource_types` parameter split on commas. */
  resource_types: string[];
  /** Parsed RFC 9396 `authorization_details` (at authorization_code token requests: those stored with the code). */
  authorization_details: AuthorizationDetail[];
}

/** Input common to every decision point. Point-specific fields are listed below. */
export interface DecisionInput {
  tenant: string;
  /** Null where no client is known yet (registration). */
  client: ClientInput | null;
  subject?: SubjectInput | null;
  /** Active delegations to the subject or client (at token, introspect, uma_permission at `rpt`, access_evaluation). */
  delegations?: DelegationGrantInput[];
  request: RequestInput;
  /** ISO 8601 instant of the decision. */
  time: string;
  [extra: string]: unknown;
}

/** `token_exchange`: the subject token, already validated by protocol code (signature, expiry). */
export interface SubjectTokenInput {
  /** urn:ietf:params:oauth:token-type:access_token or ...:id_token */
  token_type: string;
  active: boolean;
  /** Issuer: this server for access tokens, the external issuer for ID tokens. */
  iss: string | null;
  sub: string | null;
  /** Client the access token was issued to; for ID tokens, null. */
  client_id: string | null;
  /** Scopes of the access token; empty for ID tokens. */
  scopes: string[];
  resource: string | null;
  exp: number | null;
  /** The token's own `act` claim (RFC 8693 §4.1): it was itself issued to an actor. */
  act?: Record<string, unknown> | null;
  /** The token's `may_act` claim (RFC 8693 §4.4): who may act for its subject. */
  may_act?: Record<string, unknown> | null;
  /** The thumbprint of the DPoP key an access token is bound to (RFC 9449 `cnf.jkt`); the request proved it holds that key. */
  cnf_jkt?: string | null;
}

/** `introspect`: the token being introspected. */
export interface IntrospectedTokenInput {
  active: boolean;
  token_type: 'access_token' | 'refresh_token';
  client_id: string | null;
  sub: string | null;
  scopes: string[];
  resource: string | null;
  resource_types: string[];
  authorization_details: unknown[];
  exp: number | null;
  iat: number | null;
  /** JWK thumbprint of a DPoP-bound token. */
  cnf_jkt?: string | null;
}

/** `introspect`: how the resource server calling /introspect authenticated. */
export interface IntrospectionCallerInput {
  /** bearer, client_secret_basic, client_secret_post or private_key_jwt */
  method: string;
  /** Scopes of the caller's bearer token; empty when it authenticated as a client. */
  scopes: string[];
  /** The registered resource server whose introspection client this is, if any. */
  resource_server: { resource_indicator: string; type_uris: string[]; capability: Record<string, unknown> } | null;
}

/** `register`: the registration request. */
export interface RegistrationInput {
  /** The request body minus software_statement. */
  metadata: Record<string, unknown>;
  /** Effective values after defaults (grant_types default: authorization_code, refresh_token). */
  grant_types: string[];
  token_endpoint_auth_method: string;
  client_type: 'confidential' | 'public';
  software_statement: SoftwareStatementInput | null;
  /** The initial access token presented as Bearer (RFC 7591 §3), or null when none was. */
  initial_access_token?: { id: number; name: string | null } | null;
}

export interface SoftwareStatementInput {
  /** True when the signature was verified against the issuer's JWKS (SERVICE_SOFTWARE_STATEMENT_VERIFY). */
  verified: boolean;
  /** Decoded JWT claims (iss, software_id, granted_resources, ...). */
  claims: Record<string, unknown>;
}

/** `access_evaluation`: the AuthZEN request body. */
export interface EvaluationInput {
  subject: { type: string; id: string; properties?: Record<string, unknown> };
  action: { name: string; properties?: Record<string, unknown> };
  resource: { type: string; id: string; properties?: Record<string, unknown> };
  context?: Record<string, unknown>;
}

/** A UMA resource as stored, with its owner (a user `sub`, or a client for client-owned resources). */
export interface UmaResourceInput {
  _id: string;
  name?: string | null;
  type?: string | null;
  resource_scopes: string[];
  owner: { sub: string | null; client_id: string | null };
}

/**
 * `uma_permission`: one permission (scopes on one resource). `operation` says who asks: `ticket`,
 * a resource server at POST /permission (`subject`/`client` are its PAT's); `rpt`, a client
 * redeeming a ticket at /token (`subject` is the requesting party, `client` the client).
 * `resource` is null when the id is unknown.
 */
export interface PermissionInput {
  operation: 'ticket' | 'rpt';
  resource_id: string;
  resource_scopes: string[];
  resource: UmaResourceInput | null;
}

/** `delegation`: the delegation operation. */
export interface DelegationInput {
  operation: 'create' | 'update' | 'revoke';
  grantee_type: 'subject' | 'client';
  grantee_subject_id?: string | null;
  grantee_client_id?: number | string | null;
  resource_id: string;
  scopes: string[];
  expires_at: string | null;
  resource: UmaResourceInput | null;
}

/** An active delegation (neither revoked nor expired) as decisions see it in `input.delegations`. */
export interface DelegationGrantInput {
  delegation_id: string;
  grantee_type: 'subject' | 'client';
  grantee_subject_id: string | null;
  grantee_client_id: string | null;
  resource_id: string;
  scopes: string[];
  expires_at: string | null;
  owner: { sub: string | null; client_id: string | null };
}

/**
 * How protocol code outside src/oauth builds `input.client` and `input.subject` (src/oauth
 * provides it: clients and subjects are its records), so that every point describes the
 * parties alike.
 */
export interface InputParties {
  client(tenant: string, clientId: string, authenticatedWith: string | null): Promise<ClientInput | null>;
  subject(tenant: string, sub: string): Promise<SubjectInput>;
}

/** The input of each point, for protocol code that wants the compiler to check it. */
export interface PointInputs {
  authorize: DecisionInput;
  token: DecisionInput;
  token_exchange: DecisionInput & { subject_token: SubjectTokenInput; actor_token: SubjectTokenInput | null };
  introspect: DecisionInput & { token: IntrospectedTokenInput; caller: IntrospectionCallerInput; context: Record<string, unknown> };
  register: DecisionInput & { registration: RegistrationInput };
  access_evaluation: DecisionInput & { evaluation: EvaluationInput };
  uma_permission: DecisionInput & { permission: PermissionInput };
  delegation: DecisionInput & { delegation: DelegationInput };
}

/**
 * What `decide` returns. `engineError` is set when no trustworthy decision could be made
 * (engine unreachable, timeout, no decision, malformed result or input); the decision is
 * then a deny with error `temporarily_unavailable`, and audit should record outcome "error".
 */
export interface DecisionOutcome {
  /** The decision point asked (kept in the audit entry, so that the decision can be replayed). */
  point: DecisionPoint;
  decision: Decision;
  input: DecisionInput;
  engineError?: string;
  /** Which engine said what, for the audit log. */
  engines?: { rego: EngineVerdict; cedar: EngineVerdict; cedarPolicies?: string[]; regoEvaluator?: RegoEvaluator };
}

/** Where a Rego decision was made: the bundle compiled to Wasm in this process, or the OPA sidecar. */
export type RegoEvaluator = 'in-process' | 'opa';

/** allow/deny: the engine decided; none: it had no policy for the request; error: it failed. */
export type EngineVerdict = 'allow' | 'deny' | 'none' | 'error';

/** Error code of a fail-closed deny. */
export const ENGINE_FAILURE_ERROR = 'temporarily_unavailable';
