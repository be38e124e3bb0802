/**
 * The decision contract between the protocol code and the policy engine.
 *
 * Protocol code builds a `DecisionInput` for one of the named decision points, asks
 * `PolicyEngine.decide`, and relays the `Decision`'s output claims; it never grants on its
 * own. The JSON schemas in schemas.ts are the contract's one source: every type of the
 * contract below is derived from its schema (json-schema-to-ts), so the two cannot drift;
 * docs/policy.md describes every field, with examples a test checks against the schemas.
 */
import type { FromSchema } from 'json-schema-to-ts';
import type * as schemas from './schemas.js';

import type { DecisionPoint } from './points.js';

export { DECISION_POINTS, type DecisionPoint } from './points.js';

/**
 * A schema's type as the code reads it. json-schema-to-ts gives every object schema an index
 * signature (the schemas allow further properties, for forward compatibility); kept, it would
 * let any misspelt field through and make Omit<> drop every declared one. It is kept only on
 * free-form maps (objects that declare no properties), and added back where the contract means
 * it: on DecisionInput, and on AuthorizationDetail where code builds one (inside a request,
 * the declared `type` is what code reads).
 */
type Declared<T> = T extends readonly (infer Item)[]
  ? Declared<Item>[]
  : T extends object
    ? keyof DeclaredKeys<T> extends never
      ? T
      : { [Key in keyof T as string extends Key ? never : Key]: Declared<T[Key]> }
    : T;

type DeclaredKeys<T> = { [Key in keyof T as string extends Key ? never : Key]: true };

/** An RFC 9396 authorization details object; `type` is a type URI known to policy data. */
export type AuthorizationDetail = FromSchema<typeof schemas.AUTHORIZATION_DETAIL_SCHEMA>;

/** One entitlement: scopes the client may obtain for tokens aimed at resources of `type`. */
export type GrantedResource = Declared<FromSchema<typeof schemas.GRANTED_RESOURCE_SCHEMA>>;

/** The result of a decision. Output claims are only meaningful when `allow` is true (docs/policy.md, "Result"). */
export type Decision = Declared<FromSchema<typeof schemas.RESULT_SCHEMA>>;

/** The client making the request (for `register`: null, the client does not exist yet). */
export type ClientInput = Declared<FromSchema<typeof schemas.CLIENT_SCHEMA>>;

/** The end user on whose behalf the request is made, when there is one. */
export type SubjectInput = Declared<FromSchema<typeof schemas.SUBJECT_SCHEMA>>;

/** One resource indicator of a request and the type it resolved to (`input.request.resources`). */
export type ResourceIndicatorInput = Declared<FromSchema<typeof schemas.RESOURCE_INDICATOR_SCHEMA>>;

/** The request being decided. Every field is always present (empty/null when not applicable). */
export type RequestInput = Declared<FromSchema<typeof schemas.REQUEST_SCHEMA>>;

/** Input common to every decision point; point-specific fields are in PointInputs. */
export type DecisionInput = Declared<FromSchema<typeof schemas.COMMON_INPUT_SCHEMA>> & { [extra: string]: unknown };

/** `token_exchange`: the subject (or actor) token, already validated by protocol code (signature, expiry). */
export type SubjectTokenInput = Declared<FromSchema<typeof schemas.EXCHANGED_TOKEN_SCHEMA>>;

/** `introspect`: the token being introspected. */
export type IntrospectedTokenInput = Declared<FromSchema<typeof schemas.INTROSPECTED_TOKEN_SCHEMA>>;

/** `introspect`: how the resource server calling /introspect authenticated. */
export type IntrospectionCallerInput = Declared<FromSchema<typeof schemas.INTROSPECTION_CALLER_SCHEMA>>;

/** `register`: the registration request. */
export type RegistrationInput = Declared<FromSchema<typeof schemas.REGISTRATION_SCHEMA>>;

/** A software statement: `verified` when its signature checked out against the issuer's JWKS; its decoded claims. */
export type SoftwareStatementInput = NonNullable<Declared<FromSchema<typeof schemas.SOFTWARE_STATEMENT_SCHEMA>>>;

/** `access_evaluation`: the AuthZEN request body. */
export type EvaluationInput = Declared<FromSchema<typeof schemas.EVALUATION_SCHEMA>>;

/** A UMA resource as stored, with its owner (a user `sub`, or a client for client-owned resources). */
export type UmaResourceInput = NonNullable<Declared<FromSchema<typeof schemas.UMA_RESOURCE_SCHEMA>>>;

/** `uma_permission`: one permission (scopes on one resource); `resource` is null when the id is unknown. */
export type PermissionInput = Declared<FromSchema<typeof schemas.PERMISSION_SCHEMA>>;

/** `delegation`: the delegation operation. */
export type DelegationInput = Declared<FromSchema<typeof schemas.DELEGATION_SCHEMA>>;

/** `ssf`: a receiver's operation on a Shared Signals stream. */
export type SsfInput = Declared<FromSchema<typeof schemas.SSF_SCHEMA>>;

/** An active delegation (neither revoked nor expired) as decisions see it in `input.delegations`. */
export type DelegationGrantInput = Declared<FromSchema<typeof schemas.DELEGATION_GRANT_SCHEMA>>;

/**
 * How protocol code outside src/oauth builds `input.client` and `input.subject` (src/oauth
 * provides it: clients and subjects are its records), so that every point describes the
 * parties alike.
 */
export interface InputParties {
  client(tenant: string, clientId: string, authenticatedWith: string | null): Promise<ClientInput | null>;
  subject(tenant: string, sub: string): Promise<SubjectInput>;
}

/** The input of each point (its schema's type), for protocol code that wants the compiler to check it. */
export type PointInputs = {
  [Point in DecisionPoint]: Declared<FromSchema<(typeof schemas.INPUT_SCHEMAS)[Point]>> & { [extra: string]: unknown };
};

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
