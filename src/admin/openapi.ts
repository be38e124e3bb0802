import type { Middleware } from 'koa';
import { ACTIVITY_MINUTES, AUDIT_COUNT_CAP, SORTABLE_FIELDS, type AuditPage } from '../audit/index.js';
import type { AuditFields } from '../audit/log.js';
import { DECISION_POINTS, RESULT_SCHEMA } from '../policy/index.js';
import { CLIENT_CREDENTIALS_TOKEN_INPUT } from '../policy/contract/examples.js';
import { MAX_PAGE_SIZE } from './audit-routes.js';
import { COLLECTIONS, type CollectionDefinition } from '../catalog/index.js';
import { PLAYGROUND_BODY } from './decisions.js';
import {
  DEFAULT_IMPACT_LIMIT,
  POLICY_IMPACT_REQUEST_SCHEMA,
  POLICY_LAB_SCHEMAS,
  SHADOW_ACTION_SCHEMA,
} from './policy-lab.js';
import { ADMIN_PREFIX } from '../http/admin-path.js';
import { HISTORY_COLLECTIONS } from './history.js';
import { API_KEY_INPUT_SCHEMA, API_KEY_SEARCH_FIELDS, BOOTSTRAP_KEY_NAME } from './api-keys.js';
import { TENANT_INPUT_SCHEMA, TENANT_SEARCH_FIELDS, TENANTS_SEGMENT } from './tenant-routes.js';
import {
  LIST_COUNT_CAP,
  MAX_LIST_LIMIT,
  MAX_SEARCH_LENGTH,
  TOTAL_COUNT_CAPPED_HEADER,
  TOTAL_COUNT_HEADER,
} from './paging.js';
import { ADMIN_ROLES, API_KEYS_SEGMENT, permissionFor } from './roles.js';
import { ROTATED_SECRET_SCHEMA, SECRET_ROTATION_SCHEMA } from './client-secret.js';

/**
 * The Admin API's OpenAPI 3.1 document, built from the data the router serves and validates
 * with: each collection's operations and schemas come from COLLECTIONS, the upserts from the
 * router's own table; the operations that are not a collection's are one entry each in
 * OPERATIONS. It is static, so it is built once, when the router is.
 */

type Schema = Record<string, unknown> | boolean;
type Method = 'get' | 'post' | 'put' | 'delete';
/** Documented errors besides 401 (every operation), 403 (every one a role may lack) and 413/415 (every one with a body). */
type ErrorName = 'BadRequest' | 'NotFound' | 'Conflict' | 'Unprocessable';

/** One documented operation: the document is a list of these, grouped by path; adding an operation is adding one. */
interface AdminOperation {
  method: Method;
  /** Under /admin/api, in OpenAPI's template syntax (`/clients/{clientId}`). */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  parameters?: object[];
  /** The JSON request body and an example of it (the contract test sends the example). */
  body?: { schema: Schema; example: Record<string, unknown> };
  /** The answers that are not errors: status → description, body (none for a 204) and headers. */
  success: Record<number, { description: string; schema?: Schema; headers?: Record<string, object> }>;
  errors?: ErrorName[];
}

export interface OpenApiOptions {
  /** The issuer URL: the Admin API is under it (`servers`). */
  issuer: string;
  /** The router's upserts by field: collection path → route segment and query field. */
  upserts: Record<string, { route: string; field: string }>;
}

const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
const schemaRef = (name: string) => ref('schemas', name);
const string = { type: 'string' };
const dateTime = { type: 'string', format: 'date-time' };
const nullableString = { type: ['string', 'null'] };
/** An object whose `properties` are all required and `optional` are not. */
const object = (properties: Record<string, Schema>, optional: Record<string, Schema> = {}) => ({
  type: 'object',
  required: Object.keys(properties),
  properties: { ...properties, ...optional },
});
const TENANT_PARAMETERS = [ref('parameters', 'TenantQuery'), ref('parameters', 'TenantHeader')];

/**
 * An example create body per collection, valid on a fresh server when created in reference
 * order (numeric references name the first record of the referenced collection).
 */
const EXAMPLES: Record<string, Record<string, unknown>> = {
  'identity-providers': {
    issuer: 'https://idp.example.com',
    idpId: 'corporate',
    name: 'Corporate sign-in',
    clientId: 'arbiter',
    clientSecret: 'upstream-client-secret',
    scopes: ['openid', 'email'],
  },
  'resource-servers': {
    resourceIndicator: 'https://api.example.com/',
    name: 'Documents API',
    clientId: 1,
    typeUris: ['urn:example:document'],
  },
  'resource-types': { typeUri: 'urn:example:document', name: 'Document', scopes: ['read', 'write'] },
  resources: {
    resourceServerId: 1,
    resourceTypeId: 1,
    resourceIdentifier: 'doc-42',
    ownerSubjectId: 1,
    scopes: ['read'],
  },
  clients: {
    clientId: 'documents-app',
    clientType: 'confidential',
    // In clear: the Admin API stores only its BCrypt hash (a hash made elsewhere is taken as it is).
    clientSecret: 'example-secret',
    redirectUris: ['https://app.example.com/callback'],
    scopes: ['read'],
  },
  'initial-access-tokens': { name: 'partner onboarding', uses: 5 },
  subjects: { subjectId: 'alice', identityProviderId: 1, name: 'Alice', email: 'alice@example.com' },
  'policy-rules': {
    kind: 'rego',
    path: 'arbiter/example.rego',
    content: 'package arbiter.example\n\nimport rego.v1\n\ndecision := {"allow": true}\n',
  },
  'policy-data': { dataKey: 'example', payload: '{"greeting":"hello"}', version: 'draft' },
};

/** Response fields a collection's router adds beyond the stored record (AdminOptions.decorate). */
const DECORATIONS: Record<string, Record<string, Schema>> = {
  'policy-data': {
    inBundle: {
      type: 'boolean',
      description: 'true when the entry is part of the shared policy bundle (no tenantId, no version)',
    },
  },
};

/** List filters a collection takes beyond the tenant. */
const LIST_FILTERS: Record<string, object[]> = {
  'policy-data': [
    {
      name: 'bundledOnly',
      in: 'query',
      description: 'only the entries in the shared bundle',
      schema: { type: 'boolean', default: false },
    },
  ],
};

/**
 * Every list is paged (offset and limit; a `Link: rel="next"` header when more follow, the total
 * in X-Total-Count) and searched (`q`, a case-insensitive substring of the fields named).
 */
function listParameters(searchFields: string[]): object[] {
  return [
    {
      name: 'offset',
      in: 'query',
      description: 'records to skip (by ascending id)',
      schema: { type: 'integer', minimum: 0, default: 0 },
    },
    {
      name: 'limit',
      in: 'query',
      description: 'records in this page',
      schema: { type: 'integer', minimum: 1, maximum: MAX_LIST_LIMIT, default: MAX_LIST_LIMIT },
    },
    {
      name: 'q',
      in: 'query',
      description: `only the records where ${searchFields.join(', ')} contains this text (letters without case, every other character as itself); empty: all`,
      schema: { type: 'string', maxLength: MAX_SEARCH_LENGTH },
    },
  ];
}

/** The headers of a list's answer. */
const LIST_HEADERS = {
  [TOTAL_COUNT_HEADER]: {
    description: `how many records match (\`q\` included) across all pages, counted up to ${LIST_COUNT_CAP}`,
    schema: { type: 'integer', minimum: 0, maximum: LIST_COUNT_CAP },
  },
  [TOTAL_COUNT_CAPPED_HEADER]: {
    description: `\`true\` when more than ${LIST_COUNT_CAP} records match: X-Total-Count is then a lower bound (Link rel="next" still pages on)`,
    schema: { type: 'string', enum: ['true'] },
  },
  Link: {
    description:
      'present when more records follow: `<…?offset=…&limit=…>; rel="next"`, the next page with the same query',
    schema: { type: 'string' },
  },
};

/** bundledOnly filters a page after it is read: its answer has no total. */
const BUNDLED_LIST_HEADERS = {
  ...LIST_HEADERS,
  [TOTAL_COUNT_HEADER]: {
    ...LIST_HEADERS[TOTAL_COUNT_HEADER],
    description: `${LIST_HEADERS[TOTAL_COUNT_HEADER].description}; absent with bundledOnly=true`,
  },
};

const API_KEYS = `/${API_KEYS_SEGMENT}`;
const API_KEY_ID = {
  name: 'id',
  in: 'path',
  required: true,
  description: "the key's id",
  schema: { type: 'integer', minimum: 1 },
};

/** Named Admin API keys with roles (src/admin/api-keys.ts): server-wide, so no tenant parameter. */
const API_KEY_OPERATIONS: AdminOperation[] = [
  {
    method: 'get',
    path: API_KEYS,
    operationId: 'listApiKeys',
    summary: 'List the named Admin API keys (never the keys themselves)',
    tag: API_KEYS_SEGMENT,
    parameters: listParameters(API_KEY_SEARCH_FIELDS),
    success: {
      200: {
        description: 'the keys, by id',
        schema: { type: 'array', items: schemaRef('ApiKey') },
        headers: LIST_HEADERS,
      },
    },
    errors: ['BadRequest'],
  },
  {
    method: 'post',
    path: API_KEYS,
    operationId: 'createApiKey',
    summary: 'Create a named Admin API key with a role; the answer shows the key this once',
    tag: API_KEYS_SEGMENT,
    body: { schema: schemaRef('ApiKeyInput'), example: { name: 'ci-reader', role: 'read-only' } },
    success: { 201: { description: 'the key as stored, with the key itself', schema: schemaRef('ApiKeyCreated') } },
    errors: ['BadRequest', 'Conflict'],
  },
  {
    method: 'get',
    path: `${API_KEYS}/current`,
    operationId: 'getCurrentApiKey',
    summary: 'The key of this call: its name, role and permissions',
    tag: API_KEYS_SEGMENT,
    success: { 200: { description: 'the caller', schema: schemaRef('ApiKeyCaller') } },
  },
  {
    method: 'get',
    path: `${API_KEYS}/{id}`,
    operationId: 'getApiKey',
    summary: 'One named Admin API key',
    tag: API_KEYS_SEGMENT,
    parameters: [API_KEY_ID],
    success: { 200: { description: 'the key', schema: schemaRef('ApiKey') } },
    errors: ['NotFound'],
  },
  {
    method: 'delete',
    path: `${API_KEYS}/{id}`,
    operationId: 'revokeApiKey',
    summary: 'Revoke a named Admin API key: it is refused (401) from the next call on, on every node',
    tag: API_KEYS_SEGMENT,
    parameters: [API_KEY_ID],
    success: { 204: { description: 'revoked' } },
    errors: ['NotFound'],
  },
];

const role = { enum: [...ADMIN_ROLES] };
const keyName = (API_KEY_INPUT_SCHEMA.properties as { name: Schema }).name;
const API_KEY_SCHEMAS: Record<string, Schema> = {
  ApiKeyInput: API_KEY_INPUT_SCHEMA,
  ApiKey: object(
    {
      id: { type: 'integer', minimum: 1 },
      name: keyName,
      role,
      createdAt: dateTime,
      createdBy: {
        ...object({ id: { type: ['integer', 'null'] }, name: string }),
        description: `the key that created it (id null: ${BOOTSTRAP_KEY_NAME}, SERVICE_ADMIN_API_KEY)`,
      },
    },
    { description: string },
  ),
  ApiKeyCreated: {
    allOf: [
      schemaRef('ApiKey'),
      object({
        key: { type: 'string', description: 'the key, shown this once: only its SHA-256 digest is stored' },
      }),
    ],
  },
  ApiKeyCaller: object(
    {
      id: {
        type: ['integer', 'null'],
        description: `null for ${BOOTSTRAP_KEY_NAME} (SERVICE_ADMIN_API_KEY) and for a console session`,
      },
      name: string,
      role,
      bootstrap: { type: 'boolean' },
      permissions: {
        type: 'array',
        items: { enum: ['read', 'operate', 'author-policy', 'manage-keys'] },
        description: 'what the role allows (see the info description)',
      },
    },
    {
      session: {
        const: true,
        description: "present for an operator's console session (named <idpId>:<sub>), not a key",
      },
    },
  ),
};

const TENANTS = `/${TENANTS_SEGMENT}`;

/** The registry of tenants (src/admin/tenant-routes.ts): server-wide, so no tenant parameter. */
const TENANT_OPERATIONS: AdminOperation[] = [
  {
    method: 'get',
    path: TENANTS,
    operationId: 'listTenants',
    summary: 'List the tenants besides the default one: those configured (TENANTS) and those made since',
    tag: TENANTS_SEGMENT,
    parameters: listParameters(TENANT_SEARCH_FIELDS),
    success: {
      200: {
        description: 'the tenants, by id',
        schema: { type: 'array', items: schemaRef('Tenant') },
        headers: LIST_HEADERS,
      },
    },
    errors: ['BadRequest'],
  },
  {
    method: 'post',
    path: TENANTS,
    operationId: 'createTenant',
    summary:
      'Create a tenant: from now on X-Tenant-Id may name it (a write of the Admin API naming a new tenant creates it too)',
    tag: TENANTS_SEGMENT,
    body: { schema: schemaRef('TenantInput'), example: { id: 'acme' } },
    success: { 201: { description: 'the tenant', schema: schemaRef('Tenant') } },
    errors: ['BadRequest', 'Conflict'],
  },
  {
    method: 'get',
    path: `${TENANTS}/{id}`,
    operationId: 'getTenant',
    summary: 'One tenant',
    tag: TENANTS_SEGMENT,
    parameters: [
      {
        name: 'id',
        in: 'path',
        required: true,
        description: 'the tenant id',
        schema: TENANT_INPUT_SCHEMA.properties.id,
      },
    ],
    success: { 200: { description: 'the tenant', schema: schemaRef('Tenant') } },
    errors: ['NotFound'],
  },
];

const TENANT_SCHEMAS: Record<string, Schema> = {
  TenantInput: TENANT_INPUT_SCHEMA,
  Tenant: object({
    id: TENANT_INPUT_SCHEMA.properties.id,
    createdAt: dateTime,
    configured: { type: 'boolean', description: 'true when TENANTS (configuration) names it' },
  }),
};

/** The operations that are not a collection's. */
const OPERATIONS: AdminOperation[] = [
  ...API_KEY_OPERATIONS,
  ...TENANT_OPERATIONS,
  {
    method: 'get',
    path: '/audit-logs',
    operationId: 'listAuditLogs',
    summary: "One page of the audit log, of the call's tenant (or every tenant's with allTenants=true)",
    tag: 'audit-logs',
    parameters: [
      ...TENANT_PARAMETERS,
      ref('parameters', 'AllTenants'),
      { name: 'endpoint', in: 'query', description: 'only entries of this request path', schema: { type: 'string' } },
      { name: 'clientId', in: 'query', description: 'only entries of this client', schema: { type: 'string' } },
      {
        name: 'outcome',
        in: 'query',
        description: 'only entries with this outcome: the call allowed, refused (deny) or failed (error)',
        schema: { type: 'string', enum: ['allow', 'deny', 'error'] },
      },
      {
        name: 'from',
        in: 'query',
        description:
          'only entries created at or after this instant (ISO 8601: a date, or a date and time with Z or an offset); with from or to, the page is sorted by createdAt in the direction of sort',
        schema: { type: 'string' },
        example: '2026-11-27T09:00:00Z',
      },
      {
        name: 'to',
        in: 'query',
        description: 'only entries created at or before this instant (as from)',
        schema: { type: 'string' },
        example: '2026-11-27T10:00:00Z',
      },
      {
        name: 'hideConsoleReads',
        in: 'query',
        description:
          "leave out the operators' console's own reads (entries with consoleRead); writes and refused calls are always listed",
        schema: { type: 'boolean', default: false },
      },
      {
        name: 'page',
        in: 'query',
        description: 'page number, from 0',
        schema: { type: 'integer', minimum: 0, default: 0 },
      },
      {
        name: 'size',
        in: 'query',
        description: 'entries per page',
        schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE, default: 20 },
      },
      {
        name: 'cursor',
        in: 'query',
        description:
          "the previous page's nextCursor: this page starts where that one ended (page then only numbers the answer)",
        schema: { type: 'string', maxLength: 200 },
      },
      {
        name: 'sort',
        in: 'query',
        description: `"<field>,asc|desc"; field one of ${SORTABLE_FIELDS.join(', ')}`,
        schema: { type: 'string', default: 'id,desc' },
        example: 'createdAt,desc',
      },
    ],
    success: { 200: { description: 'the page', schema: schemaRef('AuditPage') } },
    errors: ['BadRequest'],
  },
  {
    method: 'get',
    path: '/audit-logs/{id}',
    operationId: 'getAuditLog',
    summary: "One audit log entry of the call's tenant (of any tenant with allTenants=true)",
    tag: 'audit-logs',
    parameters: [idParameter(), ...TENANT_PARAMETERS, ref('parameters', 'AllTenants')],
    success: { 200: { description: 'the entry', schema: schemaRef('AuditEntry') } },
    errors: ['BadRequest', 'NotFound'],
  },
  {
    method: 'get',
    path: '/activity',
    operationId: 'getRecentActivity',
    summary:
      "This node's decisions of the call's tenant over the last minutes (at most an hour), per minute, point and outcome, and the clients and points with the most denials",
    tag: 'audit-logs',
    parameters: [
      ...TENANT_PARAMETERS,
      {
        name: 'minutes',
        in: 'query',
        description: 'how many minutes, up to now',
        schema: { type: 'integer', minimum: 1, maximum: ACTIVITY_MINUTES, default: ACTIVITY_MINUTES },
      },
    ],
    success: { 200: { description: 'the activity', schema: schemaRef('RecentActivity') } },
    errors: ['BadRequest'],
  },
  {
    method: 'post',
    path: '/audit-logs/{id}/replay',
    operationId: 'replayAuditLog',
    summary: "Run an audited request's decision(s) again against today's policy and show what changed",
    tag: 'audit-logs',
    parameters: [idParameter(), ...TENANT_PARAMETERS, ref('parameters', 'AllTenants')],
    success: {
      200: {
        description: 'then, now and the differences (a list each when the request asked several decisions)',
        schema: schemaRef('Replay'),
      },
    },
    errors: ['BadRequest', 'NotFound'],
  },
  {
    method: 'post',
    path: '/decisions',
    operationId: 'explainDecision',
    summary: 'Run a decision as the endpoints do, against the live engines, and say why (nothing is issued or stored)',
    tag: 'decisions',
    parameters: TENANT_PARAMETERS,
    body: {
      schema: schemaRef('DecisionRequest'),
      example: { point: 'token', input: CLIENT_CREDENTIALS_TOKEN_INPUT },
    },
    success: {
      200: {
        description: "the decision, each engine's verdict and why",
        schema: { allOf: [schemaRef('DecisionExplanation'), object({ policyRevision: schemaRef('PolicyRevision') })] },
      },
    },
    errors: ['BadRequest'],
  },
  ...POLICY_LAB_OPERATIONS(),
  revokeTokensOperation('clients', 'clientId', {
    operationId: 'revokeClientTokens',
    summary:
      'Revoke every grant, authorization code and token of the client, whoever the user (the client stays as it is); disabling or deleting a client does the same',
  }),
  revokeTokensOperation('subjects', 'id', {
    operationId: 'revokeSubjectTokens',
    summary:
      'Revoke every grant, authorization code, token and session of the subject, at every client (the subject stays as it is); deleting the subject, or its identity provider, does the same',
  }),
  {
    method: 'post',
    path: '/clients/{clientId}/secret',
    operationId: 'rotateClientSecret',
    summary:
      "Give a confidential client a new generated secret, shown once; the previous one stays valid for graceSeconds (0 or none: it stops at once), so that every replica can change over. A second rotation ends the first one's grace",
    tag: 'clients',
    parameters: [
      {
        name: 'clientId',
        in: 'path',
        required: true,
        description: "the client's clientId",
        schema: { type: 'string', minLength: 1 },
      },
      ...TENANT_PARAMETERS,
    ],
    body: { schema: schemaRef('SecretRotation'), example: { graceSeconds: 3600 } },
    success: {
      200: {
        description: 'the new secret, in this answer only; the previous one is accepted until previousSecretValidUntil',
        schema: schemaRef('RotatedSecret'),
      },
    },
    errors: ['BadRequest', 'NotFound', 'Conflict'],
  },
  {
    method: 'get',
    path: '/outbox',
    operationId: 'getOutbox',
    summary:
      'The durable outbox of Security Event Tokens (docs/signals.md) and of back-channel logout tokens not delivered at once: entries not yet delivered, the age of the oldest, those failing and why (the oldest 20), deliveries and failures counted by this node, whether this node holds the delivery lease',
    tag: 'signals',
    success: { 200: { description: "the outbox's state", schema: schemaRef('Outbox') } },
  },
  {
    method: 'get',
    path: '/signals/streams',
    operationId: 'getSignalStreams',
    summary:
      "The tenant's Shared Signals streams (docs/signals.md): each stream's receiver, delivery method, status and events requested, with what waits for it in the outbox (pending, retrying, the oldest's age, the last failure); and the tenant's outbox entries per topic. Read-only; a key confined to tenants reads its tenants' here (GET /outbox is server-wide)",
    tag: 'signals',
    parameters: TENANT_PARAMETERS,
    success: { 200: { description: "the tenant's streams and outbox topics", schema: schemaRef('SignalStreams') } },
  },
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'This document',
    tag: 'meta',
    success: {
      200: {
        description: 'the OpenAPI 3.1 document of the Admin API',
        schema: { type: 'object', required: ['openapi', 'info', 'paths'] },
      },
    },
  },
];

/** POST /{clients|subjects}/{key}/revoke-tokens (src/admin/token-revocation.ts). */
function revokeTokensOperation(
  tag: 'clients' | 'subjects',
  key: 'clientId' | 'id',
  text: Pick<AdminOperation, 'operationId' | 'summary'>,
): AdminOperation {
  return {
    method: 'post',
    path: `/${tag}/{${key}}/revoke-tokens`,
    tag,
    ...text,
    parameters: [
      {
        name: key,
        in: 'path',
        required: true,
        description: `the record's ${key}`,
        schema: key === 'id' ? { type: 'integer', minimum: 1 } : { type: 'string', minLength: 1 },
      },
      ...TENANT_PARAMETERS,
    ],
    success: {
      200: {
        description: 'revoked: introspection answers active false, refresh invalid_grant, UserInfo 401, on every node',
        schema: schemaRef('Revoked'),
      },
    },
    errors: ['BadRequest', 'NotFound'],
  };
}

/**
 * Impact analysis and shadow policies (src/admin/policy-lab.ts): the request bodies are the
 * schemas the routes validate with, the answers the schemas the routes export beside them.
 */
function POLICY_LAB_OPERATIONS(): AdminOperation[] {
  const tag = 'policy-impact';
  const shadowAction = { schema: schemaRef('ShadowAction'), example: {} };
  return [
    {
      method: 'post',
      path: '/policy-impact',
      operationId: 'analyzePolicyImpact',
      summary:
        "A proposed policy change (rule and data records to create, replace or delete) checked as that write would be, and the tenant's recorded decisions replayed against the policy in force and the bundle it would make: every decision whose outcome differs. Nothing is changed",
      tag,
      parameters: TENANT_PARAMETERS,
      body: {
        schema: schemaRef('PolicyImpactRequest'),
        example: {
          changes: [
            {
              collection: 'policy-rules',
              op: 'create',
              record: {
                kind: 'rego',
                path: 'arbiter/impact_example.rego',
                content: 'package arbiter.impact_example\n\nanswer := 42\n',
              },
            },
          ],
          limit: DEFAULT_IMPACT_LIMIT,
          filter: { point: 'token' },
        },
      },
      success: { 200: { description: 'what the change would change', schema: schemaRef('PolicyImpact') } },
      errors: ['BadRequest', 'NotFound', 'Conflict', 'Unprocessable'],
    },
    {
      method: 'get',
      path: '/policy-shadow',
      operationId: 'getPolicyShadow',
      summary:
        "The shadow records' candidate revision and what this node has seen of the tenant's live decisions under it",
      tag,
      parameters: TENANT_PARAMETERS,
      success: { 200: { description: 'the shadow policy', schema: schemaRef('ShadowStatus') } },
      errors: ['BadRequest'],
    },
    {
      method: 'get',
      path: '/policy-shadow/differences',
      operationId: 'listPolicyShadowDifferences',
      summary:
        "The tenant's live decisions the shadow policy decided otherwise, newest first (this node's, since the candidate came into being)",
      tag,
      parameters: [
        ...TENANT_PARAMETERS,
        {
          name: 'point',
          in: 'query',
          description: 'only decisions of this point',
          schema: { enum: [...DECISION_POINTS] },
        },
        { name: 'clientId', in: 'query', description: 'only decisions of this client', schema: { type: 'string' } },
        {
          name: 'limit',
          in: 'query',
          description: 'at most this many',
          schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
        },
      ],
      success: { 200: { description: 'the differences', schema: schemaRef('ShadowDifferences') } },
      errors: ['BadRequest'],
    },
    {
      method: 'post',
      path: '/policy-shadow/promote',
      operationId: 'promotePolicyShadow',
      summary:
        'Make the shadow records live in one call: the candidate is checked as one write (a 400 if it cannot compile or decide), then each shadow replaces the live record of its path or data key',
      tag,
      body: shadowAction,
      success: { 200: { description: 'what became live', schema: schemaRef('ShadowPromotion') } },
      errors: ['BadRequest', 'Conflict'],
    },
    {
      method: 'post',
      path: '/policy-shadow/discard',
      operationId: 'discardPolicyShadow',
      summary: 'Delete every shadow record',
      tag,
      body: shadowAction,
      success: { 200: { description: 'how many were deleted', schema: schemaRef('ShadowDiscard') } },
      errors: ['BadRequest', 'Conflict'],
    },
  ];
}

/** A koa handler that answers with the document, built once. */
export function openApiRoute(options: OpenApiOptions): Middleware {
  const document = adminOpenApi(options);
  return (ctx) => {
    ctx.body = document;
  };
}

export function adminOpenApi(options: OpenApiOptions): Record<string, unknown> {
  const operations = [
    ...COLLECTIONS.flatMap((definition) => collectionOperations(definition, options.upserts[definition.path])),
    ...OPERATIONS,
  ];
  return {
    openapi: '3.1.0',
    info: {
      title: 'Arbiter Admin API',
      version: '1',
      description:
        'Configuration of an Arbiter authorization server. Every call needs the X-Admin-API-Key header: SERVICE_ADMIN_API_KEY ' +
        `(the bootstrap key, role admin) or a named key made with POST /${API_KEYS_SEGMENT}. A key's role decides what it may call, ` +
        'else the answer is 403 `insufficient_scope`: read-only reads (every GET, and the calls that store nothing and run no submitted policy: ' +
        'POST …/validate of a record that is not policy, /decisions, /audit-logs/{id}/replay); operator also writes everything but policy rules, policy data and keys; ' +
        'policy-author reads and writes policy rules and policy data, evaluates candidate policy (POST /policy-rules/validate, /policy-data/validate, /policy-impact), ' +
        'and promotes or discards shadow policy; admin may call everything, keys included. ' +
        'A call is about one tenant: `tenantId` in the body, else the `tenantId` query parameter, else X-Tenant-Id; none of them ' +
        `means the default (shared) tenant. Admin API keys and the registry of tenants are server-wide (/${API_KEYS_SEGMENT} and /${TENANTS_SEGMENT} take no tenant). ` +
        `Every list is paged (offset, limit; Link rel="next"), answers its total in X-Total-Count (counted up to ${LIST_COUNT_CAP}; X-Total-Count-Capped: true beyond) and takes q, a case-insensitive substring of its key and name fields.`,
    },
    servers: [{ url: `${options.issuer}${ADMIN_PREFIX}` }],
    security: [{ adminApiKey: [] }],
    tags: [...new Set(operations.map((operation) => operation.tag))].map((name) => ({ name })),
    paths: pathsOf(operations),
    components: {
      securitySchemes: {
        adminApiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Admin-API-Key',
          description: `SERVICE_ADMIN_API_KEY, or a named key from POST /${API_KEYS_SEGMENT}`,
        },
      },
      parameters: {
        TenantQuery: {
          name: 'tenantId',
          in: 'query',
          description: 'the tenant of the call, when the body names none',
          schema: tenantIdSchema(),
        },
        TenantHeader: {
          name: 'X-Tenant-Id',
          in: 'header',
          description: 'the tenant of the call, when neither body nor query names one',
          schema: tenantIdSchema(),
        },
        AllTenants: {
          name: 'allTenants',
          in: 'query',
          description: "every tenant's entries, not only the call's tenant's",
          schema: { type: 'boolean', default: false },
        },
      },
      schemas: {
        ...collectionSchemas(options.upserts),
        Error: ERROR_SCHEMA,
        AuditEntry: AUDIT_ENTRY_SCHEMA,
        AuditPage: AUDIT_PAGE_SCHEMA,
        Valid: VALID_SCHEMA,
        Revoked: REVOKED_SCHEMA,
        Outbox: OUTBOX_SCHEMA,
        SignalStreams: SIGNAL_STREAMS_SCHEMA,
        SecretRotation: SECRET_ROTATION_SCHEMA,
        RotatedSecret: ROTATED_SECRET_SCHEMA,
        Version: VERSION_SCHEMA,
        VersionDiff: VERSION_DIFF_SCHEMA,
        ...DECISION_SCHEMAS,
        ...API_KEY_SCHEMAS,
        RecentActivity: RECENT_ACTIVITY_SCHEMA,
        PolicyImpactRequest: POLICY_IMPACT_REQUEST_SCHEMA,
        ShadowAction: SHADOW_ACTION_SCHEMA,
        ...POLICY_LAB_SCHEMAS,
        ...TENANT_SCHEMAS,
      },
      responses: {
        BadRequest: errorResponse(
          'a body, parameter or header that breaks its schema or a rule; `field` names it when it is one field',
          'invalid_request',
        ),
        Unauthorized: {
          ...errorResponse(
            'the X-Admin-API-Key header is missing, or names no key (a wrong or revoked one)',
            'unauthorized',
          ),
          headers: { 'WWW-Authenticate': { schema: { const: 'X-Admin-API-Key' } } },
        },
        Forbidden: {
          ...errorResponse(
            "the key is valid, but its role does not allow this operation (RFC 6750 §3.1's code); `error_description` names the roles that do",
            'insufficient_scope',
          ),
          headers: { 'WWW-Authenticate': { schema: { const: 'X-Admin-API-Key error="insufficient_scope"' } } },
        },
        NotFound: errorResponse('no such record in this tenant', 'not_found'),
        Conflict: errorResponse(
          'a record of this tenant already holds a unique value; `field` names the field',
          'conflict',
        ),
        PayloadTooLarge: errorResponse('the body exceeds MAX_BODY_BYTES', 'invalid_request'),
        Unprocessable: errorResponse(
          'the replay reached a limit of the policy sandbox: `limit` says which (time: POLICY_SANDBOX_TIMEOUT_MS, memory: POLICY_SANDBOX_MEMORY_MB)',
          'invalid_request',
        ),
        UnsupportedMediaType: errorResponse('the body is not application/json', 'invalid_request'),
      },
    },
  };
}

/** List, get, create, replace, delete and validate, and the collection's upsert by a field when it has one. */
function collectionOperations(
  definition: CollectionDefinition,
  upsert?: { route: string; field: string },
): AdminOperation[] {
  const { path } = definition;
  const name = schemaName(definition);
  const noun = nounOf(definition);
  const record = schemaRef(name);
  const example = EXAMPLES[path];
  if (!example) throw new Error(`no example create body for collection ${path}`);
  const body = { schema: schemaRef(`${name}Input`), example };
  const item = `/${path}/{${definition.pathKey}}`;
  const keyed = [
    {
      name: definition.pathKey,
      in: 'path',
      required: true,
      description: `the record's ${definition.pathKey}`,
      schema: keySchema(definition),
    },
    ...TENANT_PARAMETERS,
  ];
  const conflicts: ErrorName[] = conflictFields(definition).length > 0 ? ['Conflict'] : [];
  const operation = (
    method: Method,
    at: string,
    operationId: string,
    summary: string,
    rest: Pick<AdminOperation, 'success'> & Partial<AdminOperation>,
  ): AdminOperation => ({
    method,
    path: at,
    operationId,
    summary,
    tag: path,
    parameters: TENANT_PARAMETERS,
    errors: ['BadRequest'],
    ...rest,
  });
  return [
    operation('get', `/${path}`, `list${pascal(path)}`, `List the tenant's ${noun} records`, {
      parameters: [...TENANT_PARAMETERS, ...listParameters(definition.searchFields), ...(LIST_FILTERS[path] ?? [])],
      success: {
        200: {
          description: 'the records, by id',
          schema: { type: 'array', items: record },
          headers: path === 'policy-data' ? BUNDLED_LIST_HEADERS : LIST_HEADERS,
        },
      },
    }),
    operation('post', `/${path}`, `create${name}`, `Create a ${noun} record`, {
      body,
      success: {
        201: {
          description: 'the record as stored',
          schema: definition.issuedToken ? schemaRef(`${name}Created`) : record,
        },
      },
      errors: ['BadRequest', ...conflicts],
    }),
    operation('get', item, `get${name}`, `Get one ${noun} record`, {
      parameters: keyed,
      success: { 200: { description: 'the record', schema: record } },
      errors: ['BadRequest', 'NotFound'],
    }),
    operation('put', item, `replace${name}`, `Replace a ${noun} record (the body of a create)`, {
      parameters: keyed,
      body,
      success: { 200: { description: 'the record as stored', schema: record } },
      errors: ['BadRequest', 'NotFound', ...conflicts],
    }),
    operation('delete', item, `delete${name}`, `Delete a ${noun} record`, {
      parameters: keyed,
      success: { 204: { description: 'deleted' } },
      errors: ['BadRequest', 'NotFound'],
    }),
    operation(
      'post',
      `/${path}/validate`,
      `validate${name}`,
      `Check a ${noun} body as a create would (an edit of an existing unique key as its replace), storing nothing`,
      {
        body,
        success: { 200: { description: 'the body would be accepted', schema: schemaRef('Valid') } },
      },
    ),
    ...(upsert ? [upsertOperation(definition, upsert, body.example)] : []),
    ...(HISTORY_COLLECTIONS.includes(path) ? historyOperations(definition, keyed) : []),
  ];
}

/** GET …/{id}/history, GET …/{id}/history/{number}, its diff, and POST its rollback (src/admin/history-routes.ts). */
function historyOperations(definition: CollectionDefinition, keyed: object[]): AdminOperation[] {
  const { path } = definition;
  const name = schemaName(definition);
  const noun = nounOf(definition);
  const history = `/${path}/{${definition.pathKey}}/history`;
  const numbered = [
    ...keyed,
    {
      name: 'number',
      in: 'path',
      required: true,
      description: 'the version number (1 is the oldest kept)',
      schema: { type: 'integer', minimum: 1 },
      example: 1,
    },
  ];
  const common = { tag: path, errors: ['BadRequest', 'NotFound'] as ErrorName[] };
  return [
    {
      ...common,
      method: 'get',
      path: history,
      operationId: `list${name}Versions`,
      summary: `The versions of a ${noun} record, newest first (without their text)`,
      parameters: keyed,
      success: { 200: { description: 'the versions', schema: { type: 'array', items: schemaRef('Version') } } },
    },
    {
      ...common,
      method: 'get',
      path: `${history}/{number}`,
      operationId: `get${name}Version`,
      summary: `One version of a ${noun} record, whole`,
      parameters: numbered,
      success: {
        200: {
          description: 'the version; `record` is null for a deletion',
          schema: {
            allOf: [schemaRef('Version'), object({ record: { oneOf: [schemaRef(name), { type: 'null' }] } })],
          },
        },
      },
    },
    {
      ...common,
      method: 'get',
      path: `${history}/{number}/diff`,
      operationId: `diff${name}Version`,
      summary: `What differs between a version of a ${noun} record and another version (\`to\`) or the record as it is now`,
      parameters: [
        ...numbered,
        {
          name: 'to',
          in: 'query',
          description: 'the version to compare with; the record as it is now when absent',
          schema: { type: 'integer', minimum: 1 },
        },
      ],
      success: { 200: { description: 'the differences', schema: schemaRef('VersionDiff') } },
    },
    {
      ...common,
      method: 'post',
      path: `${history}/{number}/rollback`,
      operationId: `rollback${name}`,
      summary: `Make a ${noun} record that version again (checked as a replace; a deleted record comes back under its id)`,
      parameters: numbered,
      success: { 200: { description: 'the record as stored, a new version of it', schema: schemaRef(name) } },
      errors: ['BadRequest', 'NotFound', 'Conflict'],
    },
  ];
}

/** PUT /{collection}/{route}?{field}=…: creates (201) or replaces (200) the record holding that value. */
function upsertOperation(
  definition: CollectionDefinition,
  upsert: { route: string; field: string },
  example: Record<string, unknown>,
): AdminOperation {
  const { path } = definition;
  const name = schemaName(definition);
  const query = {
    name: upsert.field,
    in: 'query',
    required: true,
    description: `the ${upsert.field} of the record to create or replace`,
    schema: propertiesOf(definition)[upsert.field],
    example: example[upsert.field],
  };
  const { [upsert.field]: _inQuery, ...bodyExample } = example;
  const conflicts: ErrorName[] = conflictFields(definition).some((field) => field !== upsert.field) ? ['Conflict'] : [];
  return {
    method: 'put',
    path: `/${path}/${upsert.route}`,
    operationId: `upsert${name}`,
    summary: `Create or replace the ${nounOf(definition)} record with this ${upsert.field}`,
    tag: path,
    parameters: [query, ...TENANT_PARAMETERS],
    body: { schema: schemaRef(`${name}Upsert`), example: bodyExample },
    success: {
      200: { description: 'replaced', schema: schemaRef(name) },
      201: { description: 'created', schema: schemaRef(name) },
    },
    errors: ['BadRequest', ...conflicts],
  };
}

/**
 * Per collection: the request body (the router's own schema object), the record as answered,
 * the 201 that shows an issued token, the upsert body (whose field may come from the query).
 */
function collectionSchemas(upserts: OpenApiOptions['upserts']): Record<string, Schema> {
  const schemas: Record<string, Schema> = {};
  for (const definition of COLLECTIONS) {
    const name = schemaName(definition);
    schemas[`${name}Input`] = definition.schema;
    schemas[name] = recordSchema(definition);
    if (definition.issuedToken) {
      const token = { type: 'string', description: 'the token, shown this once: only its digest is stored' };
      schemas[`${name}Created`] = {
        allOf: [
          schemaRef(name),
          {
            type: 'object',
            required: [definition.issuedToken.shownAs],
            properties: { [definition.issuedToken.shownAs]: token },
          },
        ],
      };
    }
    const upsert = upserts[definition.path];
    if (upsert)
      schemas[`${name}Upsert`] = {
        ...definition.schema,
        required: requiredOf(definition).filter((field) => field !== upsert.field),
      };
  }
  return schemas;
}

/**
 * A record as the API answers it: the body's fields less the secrets (which are `false`: never
 * present), plus what the server adds (id, timestamps, defaults, decorations).
 */
function recordSchema(definition: CollectionDefinition): Schema {
  const secrets = definition.secretFields ?? [];
  const hashed = definition.hashedSecret;
  const given = Object.entries(propertiesOf(definition)).filter(
    ([field]) => !secrets.includes(field) && field !== hashed?.generate,
  );
  const shownOnce: Record<string, Schema> = hashed
    ? {
        [hashed.shownAs]: {
          type: 'string',
          description: `only in the answer of a create or replace with ${hashed.generate}: the generated secret, shown this once (only its hash is stored)`,
        },
      }
    : {};
  const filled = Object.entries(definition.defaults ?? {}).filter(([field]) => !(field in propertiesOf(definition)));
  const decorations = DECORATIONS[definition.path] ?? {};
  const properties = {
    id: { type: 'integer', minimum: 1, description: 'internal numeric id' },
    ...Object.fromEntries(given),
    ...Object.fromEntries(filled.map(([field, value]) => [field, schemaOfValue(value)])),
    ...decorations,
    ...shownOnce,
    createdAt: dateTime,
    updatedAt: dateTime,
    ...Object.fromEntries(secrets.map((field) => [field, false])),
  };
  const required = [
    'id',
    'tenantId',
    'createdAt',
    'updatedAt',
    ...requiredOf(definition).filter((field) => !secrets.includes(field)),
    ...Object.keys(definition.defaults ?? {}),
    ...(definition.pathKey === 'id' ? [] : [definition.pathKey]),
    ...Object.keys(decorations),
  ];
  return { type: 'object', required: [...new Set(required)], properties };
}

function pathsOf(operations: AdminOperation[]): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of operations) (paths[operation.path] ??= {})[operation.method] = operationObject(operation);
  return paths;
}

function operationObject(operation: AdminOperation): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, { description, schema, headers }] of Object.entries(operation.success)) {
    responses[status] = {
      description,
      ...(headers ? { headers } : {}),
      ...(schema === undefined ? {} : { content: { 'application/json': { schema } } }),
    };
  }
  const errors = [
    ...(operation.errors ?? []),
    'Unauthorized',
    // The same rule the gate applies (src/admin/roles.ts): documented wherever some role is refused.
    ...(permissionFor(operation.method, operation.path) === 'read' ? [] : ['Forbidden']),
    ...(operation.body ? ['PayloadTooLarge', 'UnsupportedMediaType'] : []),
  ];
  for (const name of errors) responses[String(ERROR_STATUS[name])] = ref('responses', name);
  return {
    operationId: operation.operationId,
    summary: operation.summary,
    tags: [operation.tag],
    ...(operation.parameters ? { parameters: operation.parameters } : {}),
    ...(operation.body
      ? {
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: operation.body.schema,
                examples: { example: { value: operation.body.example } },
              },
            },
          },
        }
      : {}),
    responses,
  };
}

const ERROR_STATUS: Record<string, number> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  Unprocessable: 422,
};

function errorResponse(description: string, code: string): Record<string, unknown> {
  return {
    description,
    content: {
      'application/json': { schema: { allOf: [schemaRef('Error'), { properties: { error: { const: code } } }] } },
    },
  };
}

/** One version of a policy rule or data entry, as a history list shows it (src/admin/history-routes.ts). */
const VERSION_SCHEMA = object(
  {
    number: { type: 'integer', minimum: 1 },
    action: {
      enum: ['baseline', 'create', 'replace', 'delete', 'rollback'],
      description: 'what made this version; baseline: the record as it was before its first change was recorded',
    },
    at: dateTime,
    deleted: { type: 'boolean' },
  },
  {
    rolledBackTo: { type: 'integer', minimum: 1, description: 'the version a rollback restored' },
    fields: { type: 'object', description: 'the record as this version has it, without its content or payload' },
  },
);

/** What differs between two versions, or a version and the record now. */
const VERSION_DIFF_SCHEMA = object({
  from: { type: 'integer', minimum: 1 },
  to: { oneOf: [{ type: 'integer', minimum: 1 }, { const: 'current' }] },
  changes: {
    type: 'array',
    items: object({ field: string, from: {}, to: {} }),
    description: 'the fields that differ, but the content or payload',
  },
  diff: {
    type: 'string',
    description: 'a unified diff (diff -u) of the content, or of the payload pretty-printed; empty when they are equal',
  },
});

/** The answer of a `/validate` that finds nothing wrong. */
const VALID_SCHEMA = object({ valid: { const: true } });

/** GET /outbox (src/outbox). */
const OUTBOX_SCHEMA = object({
  pending: { type: 'integer', minimum: 0, description: 'entries not yet delivered' },
  lagSeconds: { type: 'number', minimum: 0, description: 'age of the oldest entry not yet delivered (0: none)' },
  failing: { type: 'integer', minimum: 0, description: 'pending entries whose delivery failed at least once' },
  delivered: { type: 'integer', minimum: 0, description: 'entries this node delivered since it started' },
  failures: { type: 'integer', minimum: 0, description: 'failed attempts of this node since it started' },
  givenUp: {
    type: 'integer',
    minimum: 0,
    description:
      'entries this node gave up since it started: older than their topic allows (`max-age`: BACKCHANNEL_LOGOUT_RETRY_MAX_SECONDS), or of a tenant that no longer exists (`tenant-gone`)',
  },
  topics: {
    type: 'object',
    description:
      'the same counts of this node per topic (`ssf`, `backchannel-logout`; topics it has counted nothing of are left out), given up per reason',
    additionalProperties: object({
      delivered: { type: 'integer', minimum: 0, description: 'entries of the topic this node delivered' },
      failures: { type: 'integer', minimum: 0, description: 'failed attempts of the topic on this node' },
      givenUp: object({
        'max-age': { type: 'integer', minimum: 0, description: 'given up: older than the topic allows' },
        'tenant-gone': { type: 'integer', minimum: 0, description: 'given up: their tenant no longer exists' },
      }),
    }),
  },
  leader: { type: 'boolean', description: 'whether this node holds the delivery lease now' },
  failingEntries: {
    type: 'array',
    items: object({
      id: { type: 'integer' },
      topic: { type: 'string', description: '`ssf` for Security Event Tokens, `backchannel-logout` for logout tokens' },
      stream: {
        type: 'string',
        description: 'the ordering key: `ssf:<tenant>:<stream_id>`, `backchannel-logout:<tenant>:<client_id>`',
      },
      createdAt: { type: 'string', format: 'date-time' },
      attempts: { type: 'integer', minimum: 1 },
      nextAttemptAt: { type: 'string', format: 'date-time' },
      lastError: { type: ['string', 'null'], description: 'why the last attempt failed (never a secret)' },
    }),
  },
});

/** What waits in the outbox for one stream or topic (src/signals/delivery-view.ts). */
const PENDING_DELIVERY_PROPERTIES = {
  pending: { type: 'integer', minimum: 0, description: 'entries not yet delivered' },
  retrying: { type: 'integer', minimum: 0, description: 'pending entries whose delivery failed at least once' },
  oldestPendingSeconds: {
    type: 'number',
    minimum: 0,
    description: 'age of the oldest entry not yet delivered (0: none)',
  },
  attempts: { type: 'integer', minimum: 0, description: "the oldest failing entry's failed attempts (0: none)" },
  nextAttemptAt: { ...nullableString, format: 'date-time', description: "the oldest failing entry's next attempt" },
  lastError: { ...nullableString, description: "why the oldest failing entry's last attempt failed (never a secret)" },
};

/** GET /signals/streams (src/signals/delivery-view.ts). */
const SIGNAL_STREAMS_SCHEMA = object({
  streams: {
    type: 'array',
    items: object({
      streamId: string,
      receiver: { type: 'string', description: "the receiver's client_id (the stream's owner and its SETs' aud)" },
      deliveryMethod: {
        enum: ['urn:ietf:rfc:8935', 'urn:ietf:rfc:8936'],
        description: 'push (RFC 8935) or poll (RFC 8936)',
      },
      endpoint: {
        ...nullableString,
        description:
          "a push stream's endpoint_url, origin and path only (a query may hold a credential); null for poll",
      },
      status: { enum: ['enabled', 'paused', 'disabled'] },
      reason: nullableString,
      eventsRequested: { type: 'array', items: string },
      defaultSubjects: { enum: ['ALL', 'NONE'] },
      subjects: { type: 'integer', minimum: 0, description: 'subject identifiers added to the stream' },
      createdAt: dateTime,
      delivery: object({
        ...PENDING_DELIVERY_PROPERTIES,
        awaitingAcknowledgement: {
          type: ['integer', 'null'],
          minimum: 0,
          description: "a poll stream's SETs handed to its receiver's queue and not yet acknowledged; null for push",
        },
      }),
    }),
  },
  topics: {
    type: 'array',
    description: "the tenant's outbox entries per topic (`ssf`, `backchannel-logout`); topics with none are left out",
    items: object({ topic: string, ...PENDING_DELIVERY_PROPERTIES }),
  },
  complete: {
    type: 'boolean',
    description:
      "false when the outbox held more entries than were read (the oldest 10,000 of every tenant's): the counts are of those",
  },
});

/** The answer of a revoke-tokens operation. */
const REVOKED_SCHEMA = object({
  revoked: {
    type: 'integer',
    minimum: 0,
    description: 'how many grants, codes, tokens and sessions were deleted from the store',
  },
});

/** The body of every error answer (src/http/errors.ts). */
const ERROR_SCHEMA = {
  type: 'object',
  required: ['error', 'error_description'],
  properties: {
    error: { type: 'string', description: 'an OAuth-style error code' },
    error_description: { type: 'string' },
    field: { type: 'string', description: 'the body field, query parameter or header the error is about' },
  },
};

/** An audit log entry (src/audit/log.ts): the keys are checked against AuditEntry by the compiler. */
const AUDIT_ENTRY_FIELDS: Record<keyof AuditFields | 'id' | 'createdAt', Schema> = {
  id: { type: 'integer', minimum: 1 },
  createdAt: dateTime,
  endpoint: {
    type: 'string',
    description:
      'the request path as sent (of a caller nobody authenticated: cut to 256 characters); * for an aggregated entry of several paths',
  },
  method: { type: 'string' },
  requestSummary: {
    type: 'object',
    description:
      'how credentials were presented, parameter names, non-secret values, status and error code; never a secret. ' +
      'An Admin API call names its key: adminKey {id (null: the bootstrap key), name, role}, or the console session of an operator: {id: null, name: "<idpId>:<sub>", role, session: true}; ' +
      'a console sign-in (/admin/sign-in/callback) and sign-out name the operator the same way, a sign-in refused for want of a role names them in result.operator. ' +
      'An aggregated entry (refused requests of an unauthenticated address beyond its budget) is {kind: "aggregated", count, address, window: {start, end}, endpoints, statuses}',
  },
  policyInput: {
    description:
      'the input of the policy decision; for a request that asked several decisions (AuthZEN batch, UMA permissions), {common, items}: the fields every input shares, once, and the rest of each input in order (each input is common merged with its item); null when no decision was asked',
  },
  policyDecision: {
    description:
      "the policy engine's decision; for several decisions, {common, items} as in policyInput (each decision is common merged with its item, in the order of the inputs); null when none was asked",
  },
  outcome: { enum: ['allow', 'deny', 'error'] },
  tenantId: nullableString,
  clientId: nullableString,
  subjectId: nullableString,
  ip: nullableString,
  userAgent: nullableString,
  requestId: { ...nullableString, description: 'the X-Request-ID of the request' },
  consoleRead: {
    const: true,
    description:
      "present on a read the operators' console made for itself (X-Arbiter-Console: 1 on a successful GET with a valid key); never on a write or a refused call",
  },
};
const { consoleRead: consoleReadField, ...ALWAYS_IN_AN_ENTRY } = AUDIT_ENTRY_FIELDS;
const AUDIT_ENTRY_SCHEMA = object(ALWAYS_IN_AN_ENTRY, { consoleRead: consoleReadField });

const AUDIT_PAGE_FIELDS: Record<keyof AuditPage, Schema> = {
  content: { type: 'array', items: schemaRef('AuditEntry') },
  totalElements: { type: 'integer', minimum: 0 },
  totalPages: { type: 'integer', minimum: 0 },
  number: { type: 'integer', minimum: 0, description: 'this page, from 0' },
  size: { type: 'integer', minimum: 1 },
  totalElementsCapped: {
    type: 'boolean',
    description: `more entries match than totalElements says: counting stops at ${AUDIT_COUNT_CAP}`,
  },
  nextCursor: {
    type: ['string', 'null'],
    description:
      'pass as `cursor` for the next page (same filters and sort, id or createdAt): it starts where this one ended, as fast at any depth; null on the last page or with another sort',
  },
};
const AUDIT_PAGE_SCHEMA = object(AUDIT_PAGE_FIELDS);

const point = { enum: [...DECISION_POINTS] };
const verdict = {
  enum: ['allow', 'deny', 'none', 'error'],
  description: 'none: the engine has no policy for the request',
};
const strings = { type: 'array', items: { type: 'string' } };
const { $id: _resultId, ...decisionResult } = RESULT_SCHEMA;

const outcomeCounts = object({ allow: { type: 'integer' }, deny: { type: 'integer' }, error: { type: 'integer' } });
const denials = { denials: { type: 'integer' }, decisions: { type: 'integer' } };
/** GET /activity (src/audit/activity.ts). */
const RECENT_ACTIVITY_SCHEMA = object({
  minutes: {
    type: 'array',
    description: 'oldest first, one per minute',
    items: object({ at: dateTime, byPoint: { type: 'object', additionalProperties: outcomeCounts } }),
  },
  deniedClients: { type: 'array', items: object({ clientId: string, ...denials }) },
  deniedPoints: { type: 'array', items: object({ point: string, ...denials }) },
  countingSince: { ...dateTime, description: 'when this node started counting' },
});

/** The decision playground and the replay (src/admin/decisions.ts, src/policy/explain.ts). */
const DECISION_SCHEMAS: Record<string, Schema> = {
  DecisionRequest: PLAYGROUND_BODY,
  DecisionResult: decisionResult,
  DecisionExplanation: {
    type: 'object',
    required: ['point', 'decision', 'engines'],
    properties: {
      point,
      decision: schemaRef('DecisionResult'),
      engineError: { type: 'string', description: 'why the decision failed closed' },
      engines: {
        type: 'object',
        required: ['rego', 'cedar'],
        properties: {
          rego: object(
            {
              verdict,
              rules: { type: 'array', items: object({ rule: string, location: string }) },
              trace: { ...strings, description: "the start of OPA's trace" },
            },
            { reason: string },
          ),
          cedar: object(
            { verdict, policies: { type: 'array', items: object({ id: string, text: string }) }, errors: strings },
            { reason: string },
          ),
        },
      },
    },
  },
  PolicyRevision: {
    ...object({ store: string, opa: nullableString, inProcess: nullableString }),
    description:
      'the bundle revision the store holds, the one OPA serves and the one compiled for in-process Rego evaluation (null: none; decisions then go to OPA)',
  },
  Replay: {
    type: 'object',
    required: ['entryId', 'point', 'then', 'now', 'changed', 'differences', 'policyRevision'],
    properties: {
      entryId: { type: 'integer' },
      point: { oneOf: [point, { type: 'array', items: point }] },
      then: {
        oneOf: [{ type: 'object' }, { type: 'array', items: { type: 'object' } }],
        description: 'the audited decision(s)',
      },
      now: { oneOf: [schemaRef('DecisionExplanation'), { type: 'array', items: schemaRef('DecisionExplanation') }] },
      changed: { type: 'boolean' },
      differences: { type: 'array', items: object({ field: string, then: {}, now: {} }) },
      policyRevision: schemaRef('PolicyRevision'),
    },
  },
};

function idParameter() {
  return { name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } };
}

function keySchema(definition: CollectionDefinition): Schema {
  return definition.pathKey === 'id' ? { type: 'integer', minimum: 1 } : propertyOf(definition, definition.pathKey);
}

/** Unique fields an operator's body can collide on (an issued token's digest is random). */
function conflictFields(definition: CollectionDefinition): string[] {
  return definition.uniqueFields.filter((field) => field !== definition.issuedToken?.digestField);
}

function propertiesOf(definition: CollectionDefinition): Record<string, Schema> {
  return (definition.schema as { properties: Record<string, Schema> }).properties;
}

function propertyOf(definition: CollectionDefinition, name: string): Schema {
  const schema = propertiesOf(definition)[name];
  if (!schema) throw new Error(`collection ${definition.path} has no property ${name}`);
  return schema;
}

function requiredOf(definition: CollectionDefinition): string[] {
  return (definition.schema as { required?: string[] }).required ?? [];
}

function tenantIdSchema(): Schema {
  const { pattern } = propertyOf(COLLECTIONS[0]!, 'tenantId') as { pattern: string };
  return { type: 'string', pattern };
}

/** `identity-providers` → `IdentityProvider`. */
function schemaName(definition: CollectionDefinition): string {
  return pascal(definition.path).replace(/s$/, '');
}

/** `identity-providers` → `identity provider`. */
function nounOf(definition: CollectionDefinition): string {
  return definition.path.replace(/-/g, ' ').replace(/s$/, '');
}

function pascal(path: string): string {
  return path.replace(/(^|-)(\w)/g, (_, _dash: string, letter: string) => letter.toUpperCase());
}

function schemaOfValue(value: unknown): Schema {
  if (value === null) return { type: 'null' };
  if (Number.isInteger(value)) return { type: 'integer' };
  return { type: typeof value };
}
