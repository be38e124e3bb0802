/**
 * The decision contract's worked examples, in one place: docs/policy.md quotes each one (after a
 * `<!-- example: <name> -->` marker) and test/policy/docs-examples.test.ts checks that the docs'
 * text is this data, that every input fits its point's schema, and that the default policy pack
 * decides exactly the documented result. Data only: the console's browser bundle imports it.
 */
import type { DecisionPoint } from './types.js';

/** Who the examples are about. Docs show them by name (`"<billing-service>"`) inside inputs. */
export const EXAMPLE_PARTIES = {
  'billing-service': {
    client_id: 'billing-service',
    client_type: 'confidential',
    registration_type: 'admin',
    scopes: ['invoices.read', 'invoices.write'],
    granted_resources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }],
    token_endpoint_auth_method: 'client_secret_basic',
    authenticated_with: 'client_secret_basic',
  },
  spa: {
    client_id: 'spa',
    client_type: 'public',
    registration_type: 'admin',
    scopes: ['invoices.read', 'invoices.write'],
    granted_resources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }],
    token_endpoint_auth_method: 'none',
    authenticated_with: 'none',
  },
  alice: { sub: 'alice', idp: 'corp', claims: { name: 'Alice', email: 'alice@example.com' } },
  bob: { sub: 'bob' },
} as const;

type PartyName = keyof typeof EXAMPLE_PARTIES;

/** A worked example: an input of one decision point and the default pack's decision for it. */
export interface PolicyExample {
  /** Its name in the docs' marker. */
  name: string;
  point: DecisionPoint;
  /** The input; a party appears as `"<name>"` and stands for EXAMPLE_PARTIES[name]. */
  input: Record<string, unknown>;
  /** Policy data this example adds to the default pack's, by data key. */
  data?: Record<string, unknown>;
  /** Rules this example adds to the default pack while it is decided (kind by the path's extension). */
  rules?: ExampleRule[];
  /** Show the input in the docs (a variant of an example above it shows its result only). */
  shown: boolean;
  decision: Record<string, unknown>;
}

/** A rule file as the Admin API stores it: `path` (ending in .rego or .cedar) and `content`. */
export interface ExampleRule {
  path: string;
  content: string;
}

const TIME = '2026-11-23T10:00:00.000Z';
const EMPTY_TARGET = { resource: null, resolved_resource_type: null, resource_types: [], authorization_details: [] };

function request(
  endpoint: string,
  method: string,
  parameters: Record<string, unknown>,
  grant_type: string | null,
  scopes: string[],
) {
  return { endpoint, method, parameters, grant_type, scopes, ...EMPTY_TARGET };
}

function party(name: PartyName): string {
  return `<${name}>`;
}

const authorize = {
  tenant: '_default',
  client: party('spa'),
  subject: party('alice'),
  time: TIME,
  request: request(
    '/authorize',
    'GET',
    {
      response_type: 'code',
      client_id: 'spa',
      redirect_uri: 'https://spa.example/cb',
      scope: 'openid profile invoices.read admin',
      state: 'xyz',
    },
    null,
    ['openid', 'profile', 'invoices.read', 'admin'],
  ),
};

const INVOICES_API = 'https://invoices.example/';
const INTROSPECT_TYPE = 'urn:as:introspect';
const severalResourcesScope = 'openid invoices.read introspection';
const authorizeSeveralResources = {
  ...authorize,
  request: {
    ...authorize.request,
    parameters: {
      ...authorize.request.parameters,
      scope: severalResourcesScope,
      resource: [INVOICES_API, INTROSPECT_TYPE],
    },
    scopes: severalResourcesScope.split(' '),
    resources: [
      { resource: INVOICES_API, resolved_resource_type: null },
      { resource: INTROSPECT_TYPE, resolved_resource_type: null },
    ],
  },
};

const clientCredentials = {
  tenant: '_default',
  client: party('billing-service'),
  subject: null,
  time: TIME,
  request: request(
    '/token',
    'POST',
    { grant_type: 'client_credentials', scope: 'invoices.read admin' },
    'client_credentials',
    ['invoices.read', 'admin'],
  ),
};

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const tokenExchange = {
  tenant: '_default',
  client: party('billing-service'),
  subject: party('alice'),
  time: TIME,
  request: request('/token', 'POST', { grant_type: TOKEN_EXCHANGE, scope: 'invoices.read' }, TOKEN_EXCHANGE, [
    'invoices.read',
  ]),
  subject_token: {
    token_type: 'urn:ietf:params:oauth:token-type:access_token',
    active: true,
    iss: 'http://127.0.0.1:9000',
    sub: 'alice',
    client_id: 'billing-service',
    scopes: ['openid', 'invoices.read'],
    resource: null,
    exp: 1795426335,
    cnf_jkt: null,
    cnf_x5t_s256: null,
  },
  actor_token: null,
};

/** billing-service, the invoices API's introspection client, introspects with a bearer token of its own. */
const invoicesServer = { resource_indicator: INVOICES_API, type_uris: [], capability: {} };
const introspect = {
  tenant: '_default',
  client: party('billing-service'),
  subject: party('alice'),
  time: TIME,
  request: {
    ...request('/introspect', 'POST', { token_type_hint: 'access_token' }, null, []),
    resource: INVOICES_API,
  },
  token: {
    active: true,
    token_type: 'access_token',
    client_id: 'spa',
    sub: 'alice',
    scopes: ['openid', 'invoices.read'],
    resource: INVOICES_API,
    audiences: [INVOICES_API],
    resource_types: [],
    authorization_details: [],
    exp: 1795426335,
    iat: 1795425735,
  },
  caller: {
    method: 'bearer',
    scopes: ['introspection'],
    resource_server: invoicesServer,
    resource_indicators: [INVOICES_API],
  },
  context: {},
};
/** The same token, had it been issued for another resource server: the invoices API is not told about it. */
const MAIL_API = 'https://mail.example/';
const introspectOtherAudience = {
  request: { ...introspect.request, resource: MAIL_API },
  token: { ...introspect.token, resource: MAIL_API, audiences: [MAIL_API] },
};

const registrationMetadata = {
  redirect_uris: ['https://app.example/cb'],
  grant_types: ['client_credentials'],
  client_name: 'App',
};
const register = {
  tenant: '_default',
  client: null,
  subject: null,
  time: TIME,
  request: request('/register', 'POST', registrationMetadata, null, []),
  registration: {
    metadata: registrationMetadata,
    grant_types: ['client_credentials'],
    token_endpoint_auth_method: 'client_secret_basic',
    client_type: 'confidential',
    software_statement: { verified: false, claims: { iss: 'https://unknown.example' } },
  },
};
const trustedStatementClaims = {
  iss: 'https://statements.example',
  software_id: 'app-1',
  granted_resources: [{ type: 'urn:as:introspect', scopes: ['uma_protection'] }],
};

const accessEvaluation = {
  tenant: '_default',
  client: party('billing-service'),
  subject: null,
  delegations: [],
  time: TIME,
  request: request('/access/v1/evaluation', 'POST', {}, null, []),
  evaluation: {
    subject: { type: 'user', id: 'alice', properties: {} },
    action: { name: 'read' },
    resource: { type: 'document', id: 'doc-1', properties: { owner: 'alice' } },
    context: { ip: '192.0.2.1' },
  },
};

const holiday = {
  _id: 'r1',
  name: 'Holiday',
  type: 'https://photos.example/photo',
  resource_scopes: ['view', 'print'],
  owner: { sub: 'alice', client_id: null },
};
const permission = {
  tenant: '_default',
  client: party('billing-service'),
  subject: party('alice'),
  time: TIME,
  request: request('/permission', 'POST', { resource_id: 'r1', resource_scopes: ['view'] }, null, []),
  permission: { operation: 'ticket', resource_id: 'r1', resource_scopes: ['view'], resource: holiday },
};
const UMA_TICKET = 'urn:ietf:params:oauth:grant-type:uma-ticket';
const bobsViewOfHoliday = {
  delegation_id: 'd1',
  grantee_type: 'subject',
  grantee_subject_id: 'bob',
  grantee_client_id: null,
  resource_id: 'r1',
  scopes: ['view'],
  expires_at: null,
  owner: { sub: 'alice', client_id: null },
};
const rpt = {
  tenant: '_default',
  client: party('billing-service'),
  subject: party('bob'),
  delegations: [bobsViewOfHoliday],
  time: TIME,
  request: request('/token', 'POST', { grant_type: UMA_TICKET }, UMA_TICKET, []),
  permission: { operation: 'rpt', resource_id: 'r1', resource_scopes: ['view', 'print'], resource: holiday },
};

const delegationBody = {
  grantee_type: 'subject',
  grantee_subject_id: 'bob',
  resource_id: 'r1',
  scopes: ['view'],
  expires_at: '2026-11-24T09:22:15.222Z',
};
const delegation = {
  tenant: '_default',
  client: party('billing-service'),
  subject: party('alice'),
  time: TIME,
  request: request('/delegation', 'POST', delegationBody, null, []),
  delegation: { operation: 'create', ...delegationBody, resource: holiday },
};

const ssfStreamBody = {
  delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: 'https://billing.example/ssf/events' },
  events_requested: ['https://schemas.openid.net/secevent/caep/event-type/session-revoked'],
};
const ssf = {
  tenant: '_default',
  client: party('billing-service'),
  subject: null,
  time: TIME,
  request: request('/ssf/streams', 'POST', ssfStreamBody, null, []),
  ssf: {
    operation: 'create',
    stream: {
      stream_id: null,
      owner_client_id: 'billing-service',
      delivery_method: 'urn:ietf:rfc:8935',
      endpoint_url: 'https://billing.example/ssf/events',
      events_requested: ['https://schemas.openid.net/secevent/caep/event-type/session-revoked'],
      default_subjects: 'NONE',
      status: 'enabled',
    },
    subject: null,
  },
};

/** An example shown in full. */
function shown(
  name: string,
  point: DecisionPoint,
  input: Record<string, unknown>,
  decision: Record<string, unknown>,
): PolicyExample {
  return { name, point, input, shown: true, decision };
}

/** A variant of a shown example (its input changed as the docs' text says), shown by its result. */
function variant(
  name: string,
  of: PolicyExample,
  input: Record<string, unknown>,
  decision: Record<string, unknown>,
  data?: Record<string, unknown>,
  rules?: ExampleRule[],
): PolicyExample {
  return {
    name,
    point: of.point,
    input: { ...of.input, ...input },
    shown: false,
    decision,
    ...(data ? { data } : {}),
    ...(rules ? { rules } : {}),
  };
}

/** Worked example "deny a user": a Cedar policy set that lets Rego decide for everyone but bob. */
const SUSPEND_BOB: ExampleRule = {
  path: 'examples/suspended-users.cedar',
  content: `// Cedar applies to the actions these policies name: permit them, then forbid for one user.
@id("user-grants-permitted")
permit (
  principal,
  action in [Arbiter::Action::"authorize", Arbiter::Action::"token"],
  resource
);

@id("bob-is-suspended")
@error("access_denied")
@error_description("this user is suspended")
forbid (
  principal == Arbiter::Subject::"bob",
  action in [Arbiter::Action::"authorize", Arbiter::Action::"token"],
  resource
);
`,
};

/** Worked example "require DPoP for a resource": the resource type of https://invoices.example/. */
const INVOICES_TYPE = 'urn:example:invoices';

const authorizeExample = shown('authorize', 'authorize', authorize, {
  allow: true,
  scopes: ['invoices.read', 'openid', 'profile'],
  authorization_details: [],
});
const authorizeSeveralResourcesExample = shown('authorize-several-resources', 'authorize', authorizeSeveralResources, {
  allow: true,
  scopes: ['introspection', 'invoices.read', 'openid'],
  authorization_details: [],
  resources: [
    { resource: INVOICES_API, scopes: ['invoices.read'] },
    { resource: INTROSPECT_TYPE, scopes: ['introspection'] },
  ],
});
const tokenExample = shown('token', 'token', clientCredentials, {
  allow: true,
  scopes: ['invoices.read'],
  authorization_details: [],
});
const tokenExchangeExample = shown('token_exchange', 'token_exchange', tokenExchange, {
  allow: true,
  scopes: ['invoices.read'],
  authorization_details: [],
});
const introspectExample = shown('introspect', 'introspect', introspect, {
  allow: true,
  scopes: ['openid', 'invoices.read'],
});
const registerExample = shown('register', 'register', register, {
  allow: false,
  error: 'invalid_software_statement',
  error_description: "the software statement's issuer is not trusted: https://unknown.example",
});
const accessEvaluationExample = shown('access_evaluation', 'access_evaluation', accessEvaluation, { allow: true });
const permissionExample = shown('uma_permission', 'uma_permission', permission, { allow: true, scopes: ['view'] });
const rptExample = shown('uma_permission-rpt', 'uma_permission', rpt, { allow: true, scopes: ['view'] });
const delegationExample = shown('delegation', 'delegation', delegation, { allow: true, scopes: ['view'] });
const ssfExample = shown('ssf', 'ssf', ssf, { allow: true });

export const POLICY_EXAMPLES: PolicyExample[] = [
  authorizeExample,
  variant(
    'authorize-only-admin',
    authorizeExample,
    {
      request: {
        ...authorize.request,
        parameters: { ...authorize.request.parameters, scope: 'admin' },
        scopes: ['admin'],
      },
    },
    {
      allow: false,
      error: 'invalid_scope',
      error_description: 'none of the requested scopes may be granted to this client',
    },
  ),
  authorizeSeveralResourcesExample,
  variant(
    'authorize-several-resources-one-refused',
    authorizeSeveralResourcesExample,
    {
      request: {
        ...authorizeSeveralResources.request,
        parameters: { ...authorizeSeveralResources.request.parameters, scope: 'invoices.read' },
        scopes: ['invoices.read'],
      },
    },
    {
      allow: false,
      error: 'invalid_target',
      error_description: `none of the requested scopes may be granted to this client for: ${INTROSPECT_TYPE}`,
    },
  ),
  tokenExample,
  variant(
    'token-public-client',
    tokenExample,
    { client: party('spa') },
    { allow: false, error: 'unauthorized_client', error_description: 'client_credentials is for confidential clients' },
  ),
  tokenExchangeExample,
  variant(
    'token_exchange-wider-scope',
    tokenExchangeExample,
    {
      request: {
        ...tokenExchange.request,
        parameters: { ...tokenExchange.request.parameters, scope: 'invoices.write' },
        scopes: ['invoices.write'],
      },
    },
    { allow: false, error: 'invalid_grant', error_description: "requested scope exceeds the subject token's scopes" },
  ),
  introspectExample,
  variant('introspect-other-audience', introspectExample, introspectOtherAudience, {
    allow: false,
    error: 'access_denied',
    error_description: 'the token was not issued for this resource server',
  }),
  registerExample,
  variant(
    'register-trusted-statement',
    registerExample,
    {
      registration: {
        ...register.registration,
        software_statement: { verified: true, claims: trustedStatementClaims },
      },
    },
    {
      allow: true,
      scopes: ['uma_protection'],
      extensions: {
        grant_types: ['client_credentials'],
        granted_resources: [{ type: 'urn:as:introspect', scopes: ['uma_protection'] }],
      },
    },
    {
      'oauth.trusted_issuers': {
        'https://statements.example': { jwks_uri: 'https://statements.example/jwks', uses: ['software_statement'] },
      },
    },
  ),
  accessEvaluationExample,
  variant(
    'access_evaluation-not-owner',
    accessEvaluationExample,
    { evaluation: { ...accessEvaluation.evaluation, subject: { type: 'user', id: 'bob', properties: {} } } },
    { allow: false, error: 'access_denied', error_description: 'no policy permits this action' },
  ),
  permissionExample,
  rptExample,
  variant(
    'uma_permission-rpt-no-delegation',
    rptExample,
    { delegations: [] },
    {
      allow: false,
      error: 'request_denied',
      error_description: 'the requesting party holds no permission on this resource',
    },
  ),
  variant(
    'uma_permission-rpt-no-party',
    rptExample,
    { subject: null, delegations: [] },
    {
      allow: false,
      error: 'need_info',
      error_description: 'identify the requesting party with a claim token',
      extensions: {
        required_claims: [
          {
            name: 'sub',
            friendly_name: 'requesting party',
            claim_token_format: ['urn:ietf:params:oauth:token-type:access_token'],
          },
        ],
      },
    },
  ),
  // Worked examples (docs/policy.md, "Worked examples").
  variant(
    'narrow-scope',
    tokenExample,
    {
      request: {
        ...clientCredentials.request,
        parameters: { grant_type: 'client_credentials', scope: 'invoices.read invoices.write' },
        scopes: ['invoices.read', 'invoices.write'],
      },
    },
    { allow: true, scopes: ['invoices.read'], authorization_details: [] },
    { 'oauth.clients': { 'billing-service': { withheld_scopes: ['invoices.write'] } } },
  ),
  variant(
    'deny-user',
    authorizeExample,
    { subject: party('bob') },
    { allow: false, error: 'access_denied', error_description: 'this user is suspended' },
    undefined,
    [SUSPEND_BOB],
  ),
  variant('deny-user-others', authorizeExample, {}, authorizeExample.decision, undefined, [SUSPEND_BOB]),
  variant(
    'dpop-for-resource',
    tokenExample,
    {
      request: {
        ...clientCredentials.request,
        parameters: { grant_type: 'client_credentials', scope: 'invoices.read', resource: 'https://invoices.example/' },
        scopes: ['invoices.read'],
        resource: 'https://invoices.example/',
        resolved_resource_type: INVOICES_TYPE,
        resource_types: [INVOICES_TYPE],
      },
    },
    {
      allow: true,
      scopes: ['invoices.read'],
      authorization_details: [],
      obligations: { dpop_required: true },
    },
    {
      'oauth.resource_types': {
        [INVOICES_TYPE]: {
          name: 'Invoices API',
          scopes: ['invoices.read', 'invoices.write'],
          obligations: { dpop_required: true },
        },
      },
    },
  ),
  delegationExample,
  variant(
    'delegation-not-owner',
    delegationExample,
    { subject: party('bob') },
    { allow: false, error: 'access_denied', error_description: 'only the resource owner may delegate access to it' },
  ),
  ssfExample,
  variant(
    'ssf-public-client',
    ssfExample,
    { client: party('spa'), ssf: { ...ssf.ssf, stream: { ...ssf.ssf.stream, owner_client_id: 'spa' } } },
    {
      allow: false,
      error: 'unauthorized_client',
      error_description: 'a public client cannot own a Shared Signals stream',
    },
  ),
];

/** An example's input as the policy sees it: parties in place of their names (a copy: the caller may change it). */
export function exampleInput(example: PolicyExample): Record<string, unknown> {
  return JSON.parse(JSON.stringify(example.input), (_key, value: unknown) => {
    const name = typeof value === 'string' && /^<(.+)>$/.exec(value)?.[1];
    return name && name in EXAMPLE_PARTIES ? structuredClone(EXAMPLE_PARTIES[name as PartyName]) : value;
  }) as Record<string, unknown>;
}

/**
 * A policy input to start from: the `token` point for a client_credentials request (`tenant`
 * and `time` left for the caller to fill in). The Admin API's OpenAPI example and the console's
 * playground both show it; the docs-examples test checks it as it checks the docs' examples.
 */
export const CLIENT_CREDENTIALS_TOKEN_INPUT = {
  client: {
    client_id: 'documents-app',
    client_type: 'confidential',
    registration_type: 'admin',
    scopes: ['read'],
    granted_resources: [],
    authenticated_with: 'client_secret_basic',
  },
  subject: null,
  request: {
    endpoint: '/token',
    method: 'POST',
    parameters: { grant_type: 'client_credentials', scope: 'read' },
    grant_type: 'client_credentials',
    scopes: ['read'],
    ...EMPTY_TARGET,
  },
};
