/**
 * The decision contract as JSON schemas: one input schema per decision point and the result
 * schema shared by all points. This file is the contract's one source: types.ts derives its
 * TypeScript types from these schemas (json-schema-to-ts), docs/policy.md quotes examples that
 * a test checks against them, and `decide` checks every input and result with them, so that a
 * protocol bug shows up as a clear fail-closed error instead of a silently different decision,
 * and a malformed policy output is never relayed.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { JSONSchema } from 'json-schema-to-ts';
import { DECISION_POINTS, type DecisionPoint } from './points.js';
import { describeProblem } from './result-check.js';

const ISO_INSTANT = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$';

const string = { type: 'string' } as const;
const nullableString = { type: ['string', 'null'] } as const;
const strings = { type: 'array', items: string } as const;
const nullableInteger = { type: ['integer', 'null'] } as const;
const map = { type: 'object' } as const;
const instant = { type: 'string', pattern: ISO_INSTANT } as const;
const nullableInstant = { type: ['string', 'null'], pattern: ISO_INSTANT } as const;

type Properties = Readonly<Record<string, JSONSchema>>;
type Merged<A, B> = { readonly [K in keyof A | keyof B]: K extends keyof B ? B[K] : K extends keyof A ? A[K] : never };

/** An object schema whose `required` properties are all required; further properties are allowed (forward compatibility). */
function record<const Required extends Properties, const Optional extends Properties = Record<never, never>>(
  required: Required,
  optional?: Optional,
) {
  return {
    type: 'object',
    required: Object.keys(required) as readonly (keyof Required & string)[],
    properties: { ...required, ...optional } as Merged<Required, Optional>,
  } as const;
}

/** An RFC 9396 authorization details object; `type` is a type URI known to policy data. */
export const AUTHORIZATION_DETAIL_SCHEMA = {
  type: 'object',
  required: ['type'],
  properties: { type: string },
} as const;

/** One entitlement: scopes the client may obtain for tokens aimed at resources of `type`. */
export const GRANTED_RESOURCE_SCHEMA = record({ type: string, scopes: strings });

/**
 * `token_exchange`: a subject or actor token, already validated by protocol code (signature,
 * expiry). token_type: urn:ietf:params:oauth:token-type:access_token or …:id_token. iss: this
 * server for access tokens, the external issuer for ID tokens. client_id: the client an access
 * token was issued to (null for ID tokens); scopes: empty for ID tokens. act: the token's own
 * `act` claim (RFC 8693 §4.1); may_act: who may act for its subject (§4.4); cnf_jkt: the DPoP
 * key thumbprint an access token is bound to (RFC 9449), which the request proved it holds;
 * cnf_x5t_s256: the client certificate thumbprint it is bound to (RFC 8705 §3.1), the
 * certificate the request came with.
 */
export const EXCHANGED_TOKEN_SCHEMA = record(
  {
    token_type: string,
    active: { type: 'boolean' },
    iss: nullableString,
    sub: nullableString,
    client_id: nullableString,
    scopes: strings,
    resource: nullableString,
    exp: nullableInteger,
  },
  {
    act: { type: ['object', 'null'] },
    may_act: { type: ['object', 'null'] },
    cnf_jkt: nullableString,
    cnf_x5t_s256: nullableString,
  },
);

/**
 * The client making the request. registration_type: Admin API, dynamic registration or a client
 * ID metadata document. scopes: its registered scopes (may be empty). granted_resources: its
 * entitlements per resource type (the software statement's, or for a CIMD client
 * data.oauth.public_client_policy.cimd.granted_resources). authenticated_with: how it
 * authenticated on this request (client_secret_basic, client_secret_post, private_key_jwt, none
 * or bearer).
 */
export const CLIENT_SCHEMA = record(
  {
    client_id: string,
    client_type: { enum: ['confidential', 'public'] },
    registration_type: { enum: ['admin', 'dcr', 'cimd'] },
    scopes: strings,
    granted_resources: { type: 'array', items: GRANTED_RESOURCE_SCHEMA },
  },
  {
    grant_types: strings,
    redirect_uris: strings,
    token_endpoint_auth_method: string,
    software_id: nullableString,
    authenticated_with: nullableString,
  },
);

/** The end user: the OIDC `sub` the service issues, the upstream IdP key they signed in with, stored profile claims. */
export const SUBJECT_SCHEMA = record({ sub: string }, { idp: nullableString, claims: map });

/** One RFC 8707 resource indicator of a request and the resource type URI it resolved to (null when none). */
export const RESOURCE_INDICATOR_SCHEMA = record({ resource: string, resolved_resource_type: nullableString });

/**
 * The request being decided; every field is always there (empty or null when not applicable).
 * endpoint: the path as received. parameters: query, form or JSON body with credentials removed
 * (request-input.ts). grant_type: at `token` and `token_exchange`, else null. scopes: the `scope`
 * parameter split on spaces (at authorization_code token requests: the scopes granted at
 * /authorize). resource: the RFC 8707 indicator when the request names exactly one (null when it
 * names none or several); resolved_resource_type: the type URI it resolved to. resources: every
 * indicator the request names, each with its resolved type (at /authorize there may be several;
 * at /token the one the token is for); Arbiter always gives it, the schema lets inputs written
 * before it omit it. resource_types: the `resource_types` parameter split on commas.
 * authorization_details: parsed RFC 9396 objects (at authorization_code token requests: those
 * stored with the code).
 */
export const REQUEST_SCHEMA = record(
  {
    endpoint: string,
    method: string,
    parameters: map,
    grant_type: nullableString,
    scopes: strings,
    resource: nullableString,
    resolved_resource_type: nullableString,
    resource_types: strings,
    authorization_details: { type: 'array', items: AUTHORIZATION_DETAIL_SCHEMA },
  },
  { resources: { type: 'array', items: RESOURCE_INDICATOR_SCHEMA } },
);

const owner = record({ sub: nullableString, client_id: nullableString });

/** A UMA resource as stored, with its owner (a user `sub`, or a client for client-owned resources); null when the id is unknown. */
export const UMA_RESOURCE_SCHEMA = {
  type: ['object', 'null'],
  required: ['_id', 'resource_scopes', 'owner'],
  properties: { _id: string, name: nullableString, type: nullableString, resource_scopes: strings, owner },
} as const;

/** An active delegation (neither revoked nor expired): what its grantee may do on one UMA resource. */
export const DELEGATION_GRANT_SCHEMA = record({
  delegation_id: string,
  grantee_type: { enum: ['subject', 'client'] },
  grantee_subject_id: nullableString,
  grantee_client_id: nullableString,
  resource_id: string,
  scopes: strings,
  expires_at: nullableInstant,
  owner,
});

/** The fields every point's input carries; `client` is null where there is none yet (registration). */
const common = {
  tenant: string,
  client: { oneOf: [{ type: 'null' }, CLIENT_SCHEMA] },
  request: REQUEST_SCHEMA,
  time: instant,
} as const;

/**
 * Absent and null mean the same to a policy: no user (client_credentials). `delegations` are the
 * active delegations that concern the request (docs/policy.md says which, at which points).
 */
const optionalParties = {
  subject: { oneOf: [{ type: 'null' }, SUBJECT_SCHEMA] },
  delegations: { type: 'array', items: DELEGATION_GRANT_SCHEMA },
} as const;

/** Input common to every decision point (point-specific fields are allowed beside it). */
export const COMMON_INPUT_SCHEMA = record(common, optionalParties);

/**
 * `introspect`: the token being introspected. resource: its first audience (kept for existing
 * policies); audiences: every resource it was issued for (its `aud`, RFC 8707), this server's own
 * issuer left out (a token with authorization details and no resource is bound to it), [] when
 * none; Arbiter always gives it, the schema lets inputs written before it omit it. cnf_jkt: the
 * JWK thumbprint of a DPoP-bound token; cnf_x5t_s256: the certificate thumbprint of a token bound
 * to a client certificate (RFC 8705 §3), null for others.
 */
export const INTROSPECTED_TOKEN_SCHEMA = record(
  {
    active: { type: 'boolean' },
    token_type: { enum: ['access_token', 'refresh_token'] },
    client_id: nullableString,
    sub: nullableString,
    scopes: strings,
    resource: nullableString,
    resource_types: strings,
    authorization_details: { type: 'array' },
    exp: nullableInteger,
    iat: nullableInteger,
  },
  { audiences: strings, cnf_jkt: nullableString, cnf_x5t_s256: nullableString },
);

/**
 * `introspect`: how the resource server calling /introspect authenticated. method: bearer,
 * client_secret_basic, client_secret_post or private_key_jwt; scopes: its bearer token's (empty
 * for a client); resource_server: the (first registered) resource server whose introspection
 * client it is; resource_indicators: the indicators of every resource server whose introspection
 * client it is ([] for a caller that is none); Arbiter always gives it, the schema lets inputs
 * written before it omit it.
 */
export const INTROSPECTION_CALLER_SCHEMA = record(
  {
    method: string,
    scopes: strings,
    resource_server: {
      type: ['object', 'null'],
      required: ['resource_indicator', 'type_uris', 'capability'],
      properties: { resource_indicator: string, type_uris: strings, capability: map },
    },
  },
  { resource_indicators: strings },
);

/** A software statement: `verified` when its signature checked out against the issuer's JWKS; its decoded claims. */
export const SOFTWARE_STATEMENT_SCHEMA = {
  type: ['object', 'null'],
  required: ['verified', 'claims'],
  properties: { verified: { type: 'boolean' }, claims: map },
} as const;

/**
 * `register`: the request body minus software_statement (metadata), effective values after
 * defaults (grant_types default: authorization_code, refresh_token), and the initial access
 * token presented as Bearer (RFC 7591 §3), null when none was.
 */
export const REGISTRATION_SCHEMA = record(
  {
    metadata: map,
    grant_types: strings,
    token_endpoint_auth_method: string,
    client_type: { enum: ['confidential', 'public'] },
    software_statement: SOFTWARE_STATEMENT_SCHEMA,
  },
  {
    initial_access_token: {
      type: ['object', 'null'],
      required: ['id'],
      properties: { id: { type: 'integer' }, name: { type: ['string', 'null'] } },
    },
  },
);

/** `access_evaluation`: the AuthZEN request body. */
export const EVALUATION_SCHEMA = record(
  {
    subject: record({ type: string, id: string }, { properties: map }),
    action: record({ name: string }, { properties: map }),
    resource: record({ type: string, id: string }, { properties: map }),
  },
  { context: map },
);

/**
 * `uma_permission`: one permission (scopes on one resource). `operation` says who asks: `ticket`,
 * a resource server at POST /permission (`subject`/`client` are its PAT's); `rpt`, a client
 * redeeming a ticket at /token (`subject` is the requesting party, `client` the client).
 */
export const PERMISSION_SCHEMA = record({
  operation: { enum: ['ticket', 'rpt'] },
  resource_id: string,
  resource_scopes: strings,
  resource: UMA_RESOURCE_SCHEMA,
});

/** `delegation`: the delegation operation. */
export const DELEGATION_SCHEMA = record(
  {
    operation: { enum: ['create', 'update', 'revoke'] },
    grantee_type: { enum: ['subject', 'client'] },
    resource_id: string,
    scopes: strings,
    expires_at: nullableInstant,
    resource: UMA_RESOURCE_SCHEMA,
  },
  { grantee_subject_id: nullableString, grantee_client_id: { type: ['string', 'integer', 'null'] } },
);

/**
 * `ssf`: an operation of a receiver (the client) on a Shared Signals stream of this tenant's
 * transmitter (src/signals). `stream` is the stream as it would be after the operation (for
 * `create`, `update` and `replace`) or as it is (the others); `subject` the subject identifier
 * added or removed (RFC 9493), else null.
 */
export const SSF_SCHEMA = record({
  operation: {
    enum: [
      'create',
      'read',
      'update',
      'replace',
      'delete',
      'status_read',
      'status_update',
      'subject_add',
      'subject_remove',
      'verify',
      'poll',
    ],
  },
  stream: record({
    stream_id: nullableString,
    owner_client_id: string,
    delivery_method: string,
    endpoint_url: nullableString,
    events_requested: strings,
    default_subjects: { enum: ['ALL', 'NONE'] },
    status: { enum: ['enabled', 'paused', 'disabled'] },
  }),
  subject: { anyOf: [{ type: 'null' }, map] },
});

/** A point's input schema: the common fields and the point's own. */
function pointInput<const Point extends DecisionPoint, const Fields extends Properties>(point: Point, fields: Fields) {
  return {
    $id: `arbiter:policy:input:${point}` as const,
    ...record({ ...common, ...fields } as Merged<typeof common, Fields>, optionalParties),
  };
}

/** The input schema of each decision point. */
export const INPUT_SCHEMAS = {
  authorize: pointInput('authorize', {}),
  token: pointInput('token', {}),
  token_exchange: pointInput('token_exchange', {
    subject_token: EXCHANGED_TOKEN_SCHEMA,
    actor_token: { anyOf: [{ type: 'null' }, EXCHANGED_TOKEN_SCHEMA] },
  }),
  introspect: pointInput('introspect', {
    token: INTROSPECTED_TOKEN_SCHEMA,
    caller: INTROSPECTION_CALLER_SCHEMA,
    context: map,
  }),
  register: pointInput('register', { registration: REGISTRATION_SCHEMA }),
  access_evaluation: pointInput('access_evaluation', { evaluation: EVALUATION_SCHEMA }),
  uma_permission: pointInput('uma_permission', { permission: PERMISSION_SCHEMA }),
  delegation: pointInput('delegation', { delegation: DELEGATION_SCHEMA }),
  ssf: pointInput('ssf', { ssf: SSF_SCHEMA }),
} as const satisfies Record<DecisionPoint, JSONSchema>;

/** The JSON schema of a decision point's input. */
export function inputSchema<Point extends DecisionPoint>(point: Point): (typeof INPUT_SCHEMAS)[Point] {
  return INPUT_SCHEMAS[point];
}

/** The JSON schema of every decision result (data.arbiter.<point>.decision). */
export const RESULT_SCHEMA = {
  $id: 'arbiter:policy:result',
  type: 'object',
  required: ['allow'],
  properties: {
    allow: { type: 'boolean' },
    scopes: strings,
    resources: { type: 'array', items: record({ resource: string, scopes: strings }) },
    authorization_details: { type: 'array' },
    obligations: map,
    extensions: map,
    jit_single_use: { type: 'boolean' },
    error: string,
    error_description: string,
  },
} as const;

// Each validator is compiled at its first use, not when this module loads. Results are checked
// by result-check.ts, with RESULT_SCHEMA compiled ahead of time: a decision thread checks results,
// never inputs, and does not load this module.
let ajv: Ajv | undefined;
const inputValidators = new Map<DecisionPoint, ValidateFunction>();

/** How the contract's schemas are compiled: the input schemas here, RESULT_SCHEMA by scripts/result-validator.ts. */
export const VALIDATOR_OPTIONS = { allErrors: false, strict: true, allowUnionTypes: true } as const;

function compiled(schema: object): ValidateFunction {
  ajv ??= new Ajv(VALIDATOR_OPTIONS);
  return ajv.compile(schema);
}

/** Null when the input fits its point's schema, else a short description of the first problem. */
export function checkInput(point: DecisionPoint, input: unknown): string | null {
  let validate = inputValidators.get(point);
  if (!validate) {
    if (!DECISION_POINTS.includes(point)) return `unknown decision point ${JSON.stringify(point)}`;
    inputValidators.set(point, (validate = compiled(inputSchema(point))));
  }
  return validate(input) ? null : describeProblem(validate.errors?.[0]);
}
