/**
 * JSON schemas of the decision contract (contract.ts): one input schema per decision point
 * and the result schema shared by all points. `decide` checks inputs against them so that a
 * protocol bug shows up as a clear fail-closed error instead of a silently different decision,
 * and checks results so that a malformed policy output is never relayed.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { DECISION_POINTS, type DecisionPoint } from './contract.js';

const ISO_INSTANT = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$';

const string = { type: 'string' } as const;
const nullableString = { type: ['string', 'null'] } as const;
const strings = { type: 'array', items: string } as const;
const nullableInteger = { type: ['integer', 'null'] } as const;
const map = { type: 'object' } as const;

/** An object schema whose listed properties are all required; further properties are allowed (forward compatibility). */
function record(properties: Record<string, object>, optional: Record<string, object> = {}): object {
  return { type: 'object', required: Object.keys(properties), properties: { ...properties, ...optional } };
}

const authorizationDetail = { type: 'object', required: ['type'], properties: { type: string } };

const grantedResource = record({ type: string, scopes: strings });

/** A subject or actor token of a token exchange, as protocol code validated it. */
const exchangedToken = record(
  { token_type: string, active: { type: 'boolean' }, iss: nullableString, sub: nullableString, client_id: nullableString, scopes: strings, resource: nullableString, exp: nullableInteger },
  { act: { type: ['object', 'null'] }, may_act: { type: ['object', 'null'] }, cnf_jkt: nullableString },
);

const client = record(
  {
    client_id: string,
    client_type: { enum: ['confidential', 'public'] },
    registration_type: { enum: ['admin', 'dcr', 'cimd'] },
    scopes: strings,
    granted_resources: { type: 'array', items: grantedResource },
  },
  {
    grant_types: strings,
    redirect_uris: strings,
    token_endpoint_auth_method: string,
    software_id: nullableString,
    authenticated_with: nullableString,
  },
);

const subject = record({ sub: string }, { idp: nullableString, claims: map });

const request = record({
  endpoint: string,
  method: string,
  parameters: map,
  grant_type: nullableString,
  scopes: strings,
  resource: nullableString,
  resolved_resource_type: nullableString,
  resource_types: strings,
  authorization_details: { type: 'array', items: authorizationDetail },
});

const umaResource = {
  type: ['object', 'null'],
  required: ['_id', 'resource_scopes', 'owner'],
  properties: {
    _id: string,
    name: nullableString,
    type: nullableString,
    resource_scopes: strings,
    owner: record({ sub: nullableString, client_id: nullableString }),
  },
};

/** The fields every point's input carries; `client` is null where there is none yet (registration). */
const common = { tenant: string, client: { oneOf: [{ type: 'null' }, client] }, request, time: { type: 'string', pattern: ISO_INSTANT } };
/** An active delegation (src/delegation): what its grantee may do on one UMA resource. */
const delegationGrant = record(
  {
    delegation_id: string,
    grantee_type: { enum: ['subject', 'client'] },
    grantee_subject_id: nullableString,
    grantee_client_id: nullableString,
    resource_id: string,
    scopes: strings,
    expires_at: { type: ['string', 'null'], pattern: ISO_INSTANT },
    owner: record({ sub: nullableString, client_id: nullableString }),
  },
);

/**
 * Absent and null mean the same to a policy: no user (client_credentials). `delegations` are the
 * active delegations whose grantee is the request's subject or client (docs/policy.md says at
 * which points they are given).
 */
const optionalParties = { subject: { oneOf: [{ type: 'null' }, subject] }, delegations: { type: 'array', items: delegationGrant } };

const POINT_FIELDS: Record<DecisionPoint, Record<string, object>> = {
  authorize: {},
  token: {},
  token_exchange: {
    subject_token: exchangedToken,
    actor_token: { anyOf: [{ type: 'null' }, exchangedToken] },
  },
  introspect: {
    token: record(
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
      { cnf_jkt: nullableString },
    ),
    caller: record({
      method: string,
      scopes: strings,
      resource_server: {
        type: ['object', 'null'],
        required: ['resource_indicator', 'type_uris', 'capability'],
        properties: { resource_indicator: string, type_uris: strings, capability: map },
      },
    }),
    context: map,
  },
  register: {
    registration: record({
      metadata: map,
      grant_types: strings,
      token_endpoint_auth_method: string,
      client_type: { enum: ['confidential', 'public'] },
      software_statement: {
        type: ['object', 'null'],
        required: ['verified', 'claims'],
        properties: { verified: { type: 'boolean' }, claims: map },
      },
    }, {
      initial_access_token: { type: ['object', 'null'], required: ['id'], properties: { id: { type: 'integer' }, name: { type: ['string', 'null'] } } },
    }),
  },
  access_evaluation: {
    evaluation: record(
      {
        subject: record({ type: string, id: string }, { properties: map }),
        action: record({ name: string }, { properties: map }),
        resource: record({ type: string, id: string }, { properties: map }),
      },
      { context: map },
    ),
  },
  uma_permission: {
    permission: record({ operation: { enum: ['ticket', 'rpt'] }, resource_id: string, resource_scopes: strings, resource: umaResource }),
  },
  delegation: {
    delegation: record(
      {
        operation: { enum: ['create', 'update', 'revoke'] },
        grantee_type: { enum: ['subject', 'client'] },
        resource_id: string,
        scopes: strings,
        expires_at: { type: ['string', 'null'], pattern: ISO_INSTANT },
        resource: umaResource,
      },
      { grantee_subject_id: nullableString, grantee_client_id: { type: ['string', 'integer', 'null'] } },
    ),
  },
};

/** The JSON schema of a decision point's input. */
export function inputSchema(point: DecisionPoint): object {
  return { $id: `arbiter:policy:input:${point}`, ...record({ ...common, ...POINT_FIELDS[point] }, optionalParties) };
}

/** The JSON schema of every decision result (data.arbiter.<point>.decision). */
export const RESULT_SCHEMA = {
  $id: 'arbiter:policy:result',
  type: 'object',
  required: ['allow'],
  properties: {
    allow: { type: 'boolean' },
    scopes: strings,
    authorization_details: { type: 'array' },
    obligations: map,
    extensions: map,
    jit_single_use: { type: 'boolean' },
    error: string,
    error_description: string,
  },
} as const;

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });
const inputValidators = new Map<DecisionPoint, ValidateFunction>(DECISION_POINTS.map((point) => [point, ajv.compile(inputSchema(point))]));
const resultValidator = ajv.compile(RESULT_SCHEMA);

/** Null when the input fits its point's schema, else a short description of the first problem. */
export function checkInput(point: DecisionPoint, input: unknown): string | null {
  const validate = inputValidators.get(point);
  if (!validate) return `unknown decision point ${JSON.stringify(point)}`;
  return validate(input) ? null : describe(validate.errors?.[0]);
}

/** Null when a policy result fits RESULT_SCHEMA, else a short description of the first problem. */
export function checkResult(result: unknown): string | null {
  return resultValidator(result) ? null : describe(resultValidator.errors?.[0]);
}

function describe(error: ErrorObject | undefined): string {
  if (!error) return 'invalid';
  const where = error.instancePath || '(root)';
  const missing = error.keyword === 'required' ? ` (${(error.params as { missingProperty: string }).missingProperty})` : '';
  return `${where} ${error.message ?? 'is invalid'}${missing}`;
}
