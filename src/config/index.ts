import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { projectPath } from './paths.js';

export { PROJECT_ROOT, projectPath } from './paths.js';
export { runThreadsCompiled, threadModule, threadRequirePath } from './thread-module.js';

export interface TtlConfig {
  accessTokenSeconds: number;
  authorizationCodeSeconds: number;
  refreshTokenSeconds: number;
  idTokenSeconds: number;
  sessionSeconds: number;
  interactionSeconds: number;
  /** UMA permission tickets (spec: 5 minutes). */
  permissionTicketSeconds: number;
  /** RFC 8628 device codes (and their user codes): how long a device waits for its user. */
  deviceCodeSeconds: number;
}

export interface Config {
  port: number;
  /** The public listener's address (an IP literal); null listens on every interface, as Node does by default. */
  bindAddress: string | null;
  /** The admin listener's port (Admin API, console, /metrics), which then leave the public one; null: one listener. */
  adminPort: number | null;
  /** The admin listener's address: 127.0.0.1 unless set; null only without an admin port. */
  adminBindAddress: string | null;
  issuer: string;
  storeUrl: string;
  /** How long a write to a SQLite store waits for another connection's write lock before it is answered 503. */
  storeSqliteLockWaitMs: number;
  /** External OPA; null means the server runs and manages a local OPA process. */
  opaUrl: string | null;
  /** Path of the opa binary for the managed process; null means `.bin/opa`, then PATH. */
  opaBin: string | null;
  /** Bearer token for an external OPA run with `--authentication=token`; the managed OPA gets a random one of its own. */
  opaToken: string | null;
  /** How often the managed OPA's health is asked; after three answers missed in a row it is restarted. */
  opaHealthCheckIntervalMs: number;
  policyPollMinSeconds: number;
  policyPollMaxSeconds: number;
  policyBundleToken: string;
  policyDecisionTimeoutMs: number;
  /** The memory of a decision thread (MB): its JavaScript heap, and the Wasm memory of the compiled Rego module it loads. */
  policyDecisionMemoryMb: number;
  /** Rego decisions evaluated in this process from the bundle compiled to Wasm (OPA answers what it cannot); default: with the managed OPA only. */
  policyRegoInProcess: boolean;
  /** /healthz is degraded once OPA has served an older revision than the store's for this long (it refused a bundle, or cannot reach it). */
  policyLagBoundSeconds: number;
  /** /healthz is degraded while most decisions at a point failed for the policy's own error within this window. */
  policyFaultWindowSeconds: number;
  /** /readyz is unavailable while this node's clock and the store server's differ by more than this. */
  clockSkewLimitSeconds: number;
  /** How often the clock is compared with the store server's (also once at start). */
  clockCheckIntervalSeconds: number;
  /** A policy change is tried on this many recent distinct recorded inputs per decision point (0: the contract's examples only). */
  policyCheckRecordedInputs: number;
  /** Past versions kept per policy rule and data entry (list, diff, roll back). */
  policyHistoryVersions: number;
  /** The fraction of live decisions also evaluated against the shadow policy's candidate revision (1: all). */
  policyShadowSampleRate: number;
  /** Live decisions waiting for the shadow evaluation beyond this many are dropped (and counted). */
  policyShadowQueue: number;
  /** The most of the event loop a replay (impact analysis, shadow evaluation) takes while live requests wait. */
  policyReplayShare: number;
  /** OPA CLI runs (rule checks, trial runs, Wasm builds, replays) at once per process; the rest wait. */
  policyOpaConcurrency: number;
  /** How long an OPA CLI run waits for its turn before the request is answered 503. */
  policyOpaQueueMs: number;
  /** An OPA CLI run taking longer is killed (the rule is refused, naming the limit). */
  policyOpaTimeoutMs: number;
  /** An OPA CLI run whose resident memory grows over this is killed (the rule is refused, naming the limit). */
  policyOpaMemoryMb: number;
  /** The largest policy rule (Rego or Cedar) a write may store. */
  policyRuleMaxBytes: number;
  /** The largest policy bundle (every bundled rule and data entry) a write may make. */
  policyBundleMaxBytes: number;
  /** Policy code an operator submits is evaluated in worker threads (src/policy/sandbox): the time one job may take. */
  policySandboxTimeoutMs: number;
  /** The memory of a policy worker thread: its JavaScript heap, and the Wasm memory of each OPA module it loads. */
  policySandboxMemoryMb: number;
  /** Policy worker threads per process: the most jobs of submitted policy code evaluated at once. */
  policySandboxThreads: number;
  adminApiKey: string;
  /** True when no admin key was configured and one was generated for this run. */
  adminApiKeyGenerated: boolean;
  /** The identity provider (idpId, default tenant) operators sign in to the console through; null: keys only. */
  adminSignInIdp: string | null;
  /** The claim of the operator's identity whose values adminSignInGrants maps. */
  adminSignInClaim: string;
  /** Claim value → the role (and tenants) an operator with it gets. */
  adminSignInGrants: Record<string, { role: 'read-only' | 'operator' | 'policy-author' | 'admin'; tenants?: string[] }>;
  /** How long a console sign-in lasts. */
  adminSessionSeconds: number;
  softwareStatementVerify: boolean;
  cimdAllowInsecureLocalhost: boolean;
  /** How long a client ID metadata document URL that named no usable document is refused without fetching it again. */
  cimdNegativeCacheSeconds: number;
  /** The largest client ID metadata document fetched (bytes); a larger one names no usable client. */
  cimdMaxDocumentBytes: number;
  /** The most client ID metadata document clients a tenant keeps at once; a new one beyond is refused. */
  cimdMaxClients: number;
  logLevel: string;
  /** One log line per answered request (src/http/access-log.ts). */
  accessLog: boolean;
  maxBodyBytes: number;
  /** A Security Event Token pushed by an identity provider's transmitter is refused once its iat is older than this; its jti is kept as long. */
  ssfReceiverMaxAgeSeconds: number;
  /** The most delegations one owner (a user, or a client without one) keeps, revoked and expired ones until they are deleted. */
  delegationsPerOwner: number;
  /** The most UMA resources one owner (a user, or a client without one) registers. */
  umaResourcesPerOwner: number;
  production: boolean;
  ttl: TtlConfig;
  /** Peers (IP addresses or CIDR ranges) whose X-Forwarded-* headers are believed; none by default. */
  trustedProxies: string[];
  /** PEM certificate (chain) of the public listener, which then speaks TLS; null: plain HTTP (a proxy terminates TLS). */
  tlsCertFile: string | null;
  /** PEM private key of tlsCertFile. */
  tlsKeyFile: string | null;
  /** PEM CA certificates that issue clients' certificates for RFC 8705 tls_client_auth; null: self_signed_tls_client_auth only. */
  tlsClientCaFile: string | null;
  /** The header in which a TLS-terminating proxy of TRUSTED_PROXIES forwards the client's certificate (RFC 8705); null: none believed. */
  mtlsCertificateHeader: string | null;
  /** RFC 8705 §5: where the endpoints are also served for mTLS clients (`mtls_endpoint_aliases`); null: none advertised. */
  mtlsEndpointBaseUrl: string | null;
  /** GET /metrics requires `Authorization: Bearer <metricsToken>` when set; null: open (a warning at start in production). */
  metricsToken: string | null;
  /** Authentication failures one address may make per window before it is answered 429. */
  authFailureLimit: number;
  authFailureWindowSeconds: number;
  /** Sign-ins (interactions) one address may begin at /authorize per window, in each process. */
  signInsPerAddress: number;
  signInsWindowSeconds: number;
  /** Clients one address may register at /register without an initial access token per window, in each process. */
  openRegistrationsPerAddress: number;
  openRegistrationsWindowSeconds: number;
  /** Clients registered without an initial access token a tenant may hold; past it, open registration is refused. */
  openRegistrationsMaxClients: number;
  /** Tenant ids that exist without any Admin API object naming them. */
  tenants: string[];
  /** Tenants whose DPoP proofs must carry a server nonce (RFC 9449 §8): `_default` for the default tenant, `*` for every tenant. */
  dpopNonceTenants: string[];
  /** Tenants whose every client is held to the FAPI 2.0 Security Profile: `_default`, a tenant id, or `*`. */
  fapi2SecurityTenants: string[];
  /** At most this many tenants' oidc-provider instances are kept in memory (least recently used go first). */
  tenantCacheMax: number;
  /** A tenant's oidc-provider instances no request used for this long are let go (its memory returns). */
  tenantIdleSeconds: number;
  /** Outbound fetches of caller- or operator-supplied URLs may use http:// and loopback addresses (default: outside production only). */
  outboundAllowInsecureLoopback: boolean;
  outboundTimeoutMs: number;
  outboundMaxResponseBytes: number;
  /** Seals secrets Arbiter must read back (upstream client secrets, signing keys); required in production. */
  secretsKey: string | null;
  /** The key secrets were sealed with before SERVICE_SECRETS_KEY changed (docs/operations.md: Keys and backups). */
  secretsKeyPrevious: string | null;
  /** How often every node looks for rotated signing keys. */
  signingKeyRefreshSeconds: number;
  /** Audit entries older than this many days are deleted in the background; 0 keeps them forever. */
  auditRetentionDays: number;
  /** How often expired records (and audit entries past their retention) are purged, in paced steps. */
  purgeIntervalSeconds: number;
  /** How often a node looks for outbox entries to deliver (SETs) and for the delivery lease, when no append woke it. */
  outboxPollMs: number;
  /** How long the delivery lease lasts unrenewed: the longest a dead node delays delivery. */
  outboxLeaseSeconds: number;
  /** The longest back-off between two attempts to deliver an entry (it doubles from one second). */
  outboxRetryMaxSeconds: number;
  /** How long a back-channel logout token not delivered at once is tried again (through the outbox) before it is given up. */
  backchannelLogoutRetryMaxSeconds: number;
  /** The most live tokens decided again per policy change and tenant (events from policy, src/signals). */
  signalsPolicyRecheckMax: number;
  /** The longest an RFC 8936 poll without returnImmediately waits for a SET. */
  ssfPollWaitSeconds: number;
  /** Refused unauthenticated requests one address gets an audit entry each for, per window; the rest are counted in one entry. */
  auditUnauthenticatedLimit: number;
  /** The same for all such requests of this node together, per window: beyond it they are counted per endpoint and status, not per address. */
  auditUnauthenticatedTotalLimit: number;
  auditAggregateWindowSeconds: number;
  /** Protocol endpoints whose allowed requests are counted per window (one aggregated entry per tenant, client and endpoint). */
  auditAllowedCounted: string[];
  /** Protocol endpoints whose allowed requests get no entry; refusals and Admin API calls always do. */
  auditAllowedUnrecorded: string[];
  /** The audit log is kept under about this many MB (the oldest entries deleted first); 0: no bound. */
  auditRetentionMaxMb: number;
  /** A request (headers and body) must arrive within this time, its headers within the second; else 408 and the connection closes. */
  httpRequestTimeoutMs: number;
  httpHeadersTimeoutMs: number;
  /** An idle kept-alive connection is closed after this time. */
  httpKeepAliveTimeoutMs: number;
  /**
   * Server processes sharing the port under one primary (src/workers); 1 runs the single process
   * of old. Default: the cores available (1 with `sqlite::memory:`, which each process would have alone).
   */
  workers: number;
  /** With workers > 1: one more worker kept loaded (neither listening nor opening the store) to take a dead worker's place within a second or so. */
  workerStandby: boolean;
  workerHeartbeatTimeoutMs: number;
  /**
   * After each full garbage collection, V8 lets the server's old generation grow to (1 + this/100)
   * times what it kept before collecting again; 0: V8's own heuristics (up to 4 times). See src/workers/node-flags.ts.
   */
  heapGrowthPercent: number;
  /** OTLP/HTTP collector base URL (traces go to its /v1/traces); null with no other endpoint: no tracing. */
  otlpEndpoint: string | null;
  /** Where spans are sent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else otlpEndpoint + /v1/traces; null: tracing off. */
  otlpTracesEndpoint: string | null;
  /** The `service.name` of every span. */
  serviceName: string;
  /** Spans are sent in batches, at most this long after they end. */
  tracingExportDelayMs: number;
  /** The share of traces Arbiter starts itself that are sampled (a caller's traceparent decides for its own). */
  tracingSampleRatio: number;
}

/** Environment variable → configuration key. Values are parsed as the schema's type says. */
export const ENVIRONMENT: Readonly<Record<string, string>> = {
  PORT: 'port',
  BIND_ADDRESS: 'bindAddress',
  ADMIN_PORT: 'adminPort',
  ADMIN_BIND_ADDRESS: 'adminBindAddress',
  ISSUER: 'issuer',
  STORE_URL: 'storeUrl',
  STORE_SQLITE_LOCK_WAIT_MS: 'storeSqliteLockWaitMs',
  OPA_URL: 'opaUrl',
  OPA_BIN: 'opaBin',
  OPA_TOKEN: 'opaToken',
  OPA_HEALTH_CHECK_INTERVAL_MS: 'opaHealthCheckIntervalMs',
  POLICY_POLL_MIN_SECONDS: 'policyPollMinSeconds',
  POLICY_POLL_MAX_SECONDS: 'policyPollMaxSeconds',
  POLICY_BUNDLE_TOKEN: 'policyBundleToken',
  POLICY_DECISION_TIMEOUT_MS: 'policyDecisionTimeoutMs',
  POLICY_DECISION_MEMORY_MB: 'policyDecisionMemoryMb',
  POLICY_REGO_IN_PROCESS: 'policyRegoInProcess',
  POLICY_LAG_BOUND_SECONDS: 'policyLagBoundSeconds',
  POLICY_FAULT_WINDOW_SECONDS: 'policyFaultWindowSeconds',
  CLOCK_SKEW_LIMIT_SECONDS: 'clockSkewLimitSeconds',
  CLOCK_CHECK_INTERVAL_SECONDS: 'clockCheckIntervalSeconds',
  POLICY_CHECK_RECORDED_INPUTS: 'policyCheckRecordedInputs',
  POLICY_HISTORY_VERSIONS: 'policyHistoryVersions',
  POLICY_SHADOW_SAMPLE_RATE: 'policyShadowSampleRate',
  POLICY_SHADOW_QUEUE: 'policyShadowQueue',
  POLICY_REPLAY_SHARE: 'policyReplayShare',
  POLICY_OPA_CONCURRENCY: 'policyOpaConcurrency',
  POLICY_OPA_QUEUE_MS: 'policyOpaQueueMs',
  POLICY_OPA_TIMEOUT_MS: 'policyOpaTimeoutMs',
  POLICY_OPA_MEMORY_MB: 'policyOpaMemoryMb',
  POLICY_RULE_MAX_BYTES: 'policyRuleMaxBytes',
  POLICY_BUNDLE_MAX_BYTES: 'policyBundleMaxBytes',
  POLICY_SANDBOX_TIMEOUT_MS: 'policySandboxTimeoutMs',
  POLICY_SANDBOX_MEMORY_MB: 'policySandboxMemoryMb',
  POLICY_SANDBOX_THREADS: 'policySandboxThreads',
  SERVICE_ADMIN_API_KEY: 'adminApiKey',
  ADMIN_SIGN_IN_IDP: 'adminSignInIdp',
  ADMIN_SIGN_IN_CLAIM: 'adminSignInClaim',
  ADMIN_SIGN_IN_GRANTS: 'adminSignInGrants',
  ADMIN_SESSION_SECONDS: 'adminSessionSeconds',
  SERVICE_SOFTWARE_STATEMENT_VERIFY: 'softwareStatementVerify',
  SERVICE_REGISTRATION_CIMD_ALLOW_INSECURE_LOCALHOST: 'cimdAllowInsecureLocalhost',
  SERVICE_REGISTRATION_CIMD_NEGATIVE_CACHE_SECONDS: 'cimdNegativeCacheSeconds',
  SERVICE_REGISTRATION_CIMD_MAX_DOCUMENT_BYTES: 'cimdMaxDocumentBytes',
  SERVICE_REGISTRATION_CIMD_MAX_CLIENTS: 'cimdMaxClients',
  LOG_LEVEL: 'logLevel',
  ACCESS_LOG: 'accessLog',
  MAX_BODY_BYTES: 'maxBodyBytes',
  SSF_RECEIVER_MAX_AGE_SECONDS: 'ssfReceiverMaxAgeSeconds',
  DELEGATIONS_PER_OWNER: 'delegationsPerOwner',
  UMA_RESOURCES_PER_OWNER: 'umaResourcesPerOwner',
  ACCESS_TOKEN_TTL_SECONDS: 'ttl.accessTokenSeconds',
  AUTHORIZATION_CODE_TTL_SECONDS: 'ttl.authorizationCodeSeconds',
  REFRESH_TOKEN_TTL_SECONDS: 'ttl.refreshTokenSeconds',
  ID_TOKEN_TTL_SECONDS: 'ttl.idTokenSeconds',
  SESSION_TTL_SECONDS: 'ttl.sessionSeconds',
  INTERACTION_TTL_SECONDS: 'ttl.interactionSeconds',
  UMA_TICKET_TTL_SECONDS: 'ttl.permissionTicketSeconds',
  DEVICE_CODE_TTL_SECONDS: 'ttl.deviceCodeSeconds',
  TRUSTED_PROXIES: 'trustedProxies',
  TLS_CERT_FILE: 'tlsCertFile',
  TLS_KEY_FILE: 'tlsKeyFile',
  TLS_CLIENT_CA_FILE: 'tlsClientCaFile',
  MTLS_CERTIFICATE_HEADER: 'mtlsCertificateHeader',
  MTLS_ENDPOINT_BASE_URL: 'mtlsEndpointBaseUrl',
  METRICS_TOKEN: 'metricsToken',
  AUTH_FAILURE_LIMIT: 'authFailureLimit',
  AUTH_FAILURE_WINDOW_SECONDS: 'authFailureWindowSeconds',
  SIGN_INS_PER_ADDRESS: 'signInsPerAddress',
  SIGN_INS_WINDOW_SECONDS: 'signInsWindowSeconds',
  OPEN_REGISTRATIONS_PER_ADDRESS: 'openRegistrationsPerAddress',
  OPEN_REGISTRATIONS_WINDOW_SECONDS: 'openRegistrationsWindowSeconds',
  OPEN_REGISTRATIONS_MAX_CLIENTS: 'openRegistrationsMaxClients',
  TENANTS: 'tenants',
  DPOP_NONCE_TENANTS: 'dpopNonceTenants',
  FAPI2_SECURITY_TENANTS: 'fapi2SecurityTenants',
  TENANT_CACHE_MAX: 'tenantCacheMax',
  TENANT_IDLE_SECONDS: 'tenantIdleSeconds',
  OUTBOUND_ALLOW_INSECURE_LOOPBACK: 'outboundAllowInsecureLoopback',
  OUTBOUND_TIMEOUT_MS: 'outboundTimeoutMs',
  OUTBOUND_MAX_RESPONSE_BYTES: 'outboundMaxResponseBytes',
  SERVICE_SECRETS_KEY: 'secretsKey',
  SERVICE_SECRETS_KEY_PREVIOUS: 'secretsKeyPrevious',
  SIGNING_KEY_REFRESH_SECONDS: 'signingKeyRefreshSeconds',
  AUDIT_RETENTION_DAYS: 'auditRetentionDays',
  PURGE_INTERVAL_SECONDS: 'purgeIntervalSeconds',
  OUTBOX_POLL_MS: 'outboxPollMs',
  OUTBOX_LEASE_SECONDS: 'outboxLeaseSeconds',
  OUTBOX_RETRY_MAX_SECONDS: 'outboxRetryMaxSeconds',
  BACKCHANNEL_LOGOUT_RETRY_MAX_SECONDS: 'backchannelLogoutRetryMaxSeconds',
  SIGNALS_POLICY_RECHECK_MAX: 'signalsPolicyRecheckMax',
  SSF_POLL_WAIT_SECONDS: 'ssfPollWaitSeconds',
  AUDIT_UNAUTHENTICATED_LIMIT: 'auditUnauthenticatedLimit',
  AUDIT_UNAUTHENTICATED_TOTAL_LIMIT: 'auditUnauthenticatedTotalLimit',
  AUDIT_AGGREGATE_WINDOW_SECONDS: 'auditAggregateWindowSeconds',
  AUDIT_ALLOWED_COUNTED: 'auditAllowedCounted',
  AUDIT_ALLOWED_UNRECORDED: 'auditAllowedUnrecorded',
  AUDIT_RETENTION_MAX_MB: 'auditRetentionMaxMb',
  HTTP_REQUEST_TIMEOUT_MS: 'httpRequestTimeoutMs',
  HTTP_HEADERS_TIMEOUT_MS: 'httpHeadersTimeoutMs',
  HTTP_KEEP_ALIVE_TIMEOUT_MS: 'httpKeepAliveTimeoutMs',
  WORKERS: 'workers',
  WORKER_STANDBY: 'workerStandby',
  WORKER_HEARTBEAT_TIMEOUT_MS: 'workerHeartbeatTimeoutMs',
  HEAP_GROWTH_PERCENT: 'heapGrowthPercent',
  // OpenTelemetry's own names (its SDK environment specification), so that a deployment's usual settings apply.
  OTEL_EXPORTER_OTLP_ENDPOINT: 'otlpEndpoint',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'otlpTracesEndpoint',
  OTEL_SERVICE_NAME: 'serviceName',
  OTEL_BSP_SCHEDULE_DELAY: 'tracingExportDelayMs',
  OTEL_TRACES_SAMPLER_ARG: 'tracingSampleRatio',
};

const positive = { type: 'integer', minimum: 1 };

/** The protocol endpoints the audit log records (with the paths below them); the Admin API's calls are recorded too, always. */
export const AUDITED_PROTOCOL_ENDPOINTS = [
  '/authorize',
  '/par',
  '/token',
  '/introspect',
  '/revoke',
  '/register',
  // RFC 8628: device codes (/device/auth), and the user code page a browser visits as it does /authorize.
  '/device',
  '/userinfo',
  '/resource_registration',
  '/permission',
  '/delegation',
  '/access/v1',
  // Security Event Tokens an identity provider's Shared Signals transmitter pushes (src/signals/receiver).
  '/idp/ssf-events',
];
export const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['port', 'storeUrl', 'policyPollMinSeconds', 'policyPollMaxSeconds', 'ttl'],
  properties: {
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    bindAddress: { type: ['string', 'null'], minLength: 1 },
    adminPort: { type: ['integer', 'null'], minimum: 0, maximum: 65535 },
    adminBindAddress: { type: ['string', 'null'], minLength: 1 },
    issuer: { type: ['string', 'null'], pattern: '^https?://[^#?]+[^/#?]$' },
    storeUrl: { type: 'string', pattern: '^(sqlite:|postgres(ql)?://|mongodb(\\+srv)?://)' },
    storeSqliteLockWaitMs: { type: 'integer', minimum: 100, maximum: 60000 },
    opaUrl: { type: ['string', 'null'], pattern: '^https?://' },
    opaBin: { type: ['string', 'null'], minLength: 1 },
    opaToken: { type: ['string', 'null'], minLength: 16 },
    opaHealthCheckIntervalMs: { type: 'integer', minimum: 200, maximum: 60000 },
    policyPollMinSeconds: positive,
    policyPollMaxSeconds: positive,
    policyBundleToken: { type: ['string', 'null'], minLength: 16 },
    policyDecisionTimeoutMs: positive,
    policyDecisionMemoryMb: { type: 'integer', minimum: 64, maximum: 4096 },
    policyRegoInProcess: { type: ['boolean', 'null'] },
    policyLagBoundSeconds: positive,
    policyFaultWindowSeconds: positive,
    clockSkewLimitSeconds: positive,
    clockCheckIntervalSeconds: positive,
    policyCheckRecordedInputs: { type: 'integer', minimum: 0, maximum: 1000 },
    policyHistoryVersions: { type: 'integer', minimum: 1, maximum: 10000 },
    policyShadowSampleRate: { type: 'number', minimum: 0, maximum: 1 },
    policyShadowQueue: { type: 'integer', minimum: 0, maximum: 1000000 },
    policyReplayShare: { type: 'number', exclusiveMinimum: 0, maximum: 1 },
    policyOpaConcurrency: { type: 'integer', minimum: 1, maximum: 64 },
    policyOpaQueueMs: positive,
    policyOpaTimeoutMs: positive,
    policyOpaMemoryMb: { type: 'integer', minimum: 32 },
    policyRuleMaxBytes: positive,
    policyBundleMaxBytes: positive,
    policySandboxTimeoutMs: { type: 'integer', minimum: 100, maximum: 600000 },
    policySandboxMemoryMb: { type: 'integer', minimum: 64, maximum: 4096 },
    policySandboxThreads: { type: 'integer', minimum: 1, maximum: 64 },
    adminApiKey: { type: ['string', 'null'], minLength: 16 },
    adminSignInIdp: { type: ['string', 'null'], minLength: 1, maxLength: 128 },
    adminSignInClaim: { type: 'string', minLength: 1, maxLength: 128 },
    adminSignInGrants: {
      type: 'object',
      maxProperties: 1000,
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['role'],
        properties: {
          role: { enum: ['read-only', 'operator', 'policy-author', 'admin'] },
          tenants: {
            type: 'array',
            minItems: 1,
            maxItems: 100,
            items: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' },
          },
        },
      },
    },
    adminSessionSeconds: { type: 'integer', minimum: 60, maximum: 604800 },
    softwareStatementVerify: { type: 'boolean' },
    cimdAllowInsecureLocalhost: { type: 'boolean' },
    cimdNegativeCacheSeconds: { type: 'integer', minimum: 1, maximum: 3600 },
    cimdMaxDocumentBytes: { type: 'integer', minimum: 1024, maximum: 1048576 },
    cimdMaxClients: { type: 'integer', minimum: 1, maximum: 1000000 },
    logLevel: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
    accessLog: { type: 'boolean' },
    maxBodyBytes: positive,
    ssfReceiverMaxAgeSeconds: { type: 'integer', minimum: 60, maximum: 604800 },
    delegationsPerOwner: { type: 'integer', minimum: 1, maximum: 1000000 },
    umaResourcesPerOwner: { type: 'integer', minimum: 1, maximum: 10000000 },
    trustedProxies: { type: 'array', items: { type: 'string', pattern: '^[0-9A-Fa-f:.]+(/[0-9]{1,3})?$' } },
    tlsCertFile: { type: ['string', 'null'], minLength: 1 },
    tlsKeyFile: { type: ['string', 'null'], minLength: 1 },
    tlsClientCaFile: { type: ['string', 'null'], minLength: 1 },
    mtlsCertificateHeader: { type: ['string', 'null'], pattern: '^[A-Za-z0-9-]{1,64}$' },
    mtlsEndpointBaseUrl: { type: ['string', 'null'], pattern: '^https://[^#?]+[^/#?]$' },
    metricsToken: { type: ['string', 'null'], minLength: 16 },
    authFailureLimit: positive,
    authFailureWindowSeconds: positive,
    signInsPerAddress: positive,
    signInsWindowSeconds: positive,
    openRegistrationsPerAddress: positive,
    openRegistrationsWindowSeconds: positive,
    openRegistrationsMaxClients: positive,
    tenants: { type: 'array', items: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' } },
    dpopNonceTenants: {
      type: 'array',
      items: { type: 'string', pattern: '^(\\*|_default|[A-Za-z0-9][A-Za-z0-9._-]{0,63})$' },
    },
    fapi2SecurityTenants: {
      type: 'array',
      items: { type: 'string', pattern: '^(\\*|_default|[A-Za-z0-9][A-Za-z0-9._-]{0,63})$' },
    },
    tenantCacheMax: positive,
    tenantIdleSeconds: positive,
    outboundAllowInsecureLoopback: { type: ['boolean', 'null'] },
    outboundTimeoutMs: positive,
    outboundMaxResponseBytes: positive,
    secretsKey: { type: ['string', 'null'], pattern: '^[A-Za-z0-9_-]{43}$' },
    secretsKeyPrevious: { type: ['string', 'null'], pattern: '^[A-Za-z0-9_-]{43}$' },
    signingKeyRefreshSeconds: positive,
    auditRetentionDays: { type: 'integer', minimum: 0 },
    purgeIntervalSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
    outboxPollMs: { type: 'integer', minimum: 10, maximum: 60000 },
    outboxLeaseSeconds: { type: 'integer', minimum: 1, maximum: 3600 },
    outboxRetryMaxSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
    backchannelLogoutRetryMaxSeconds: { type: 'integer', minimum: 1, maximum: 604800 },
    signalsPolicyRecheckMax: { type: 'integer', minimum: 0, maximum: 1000000 },
    ssfPollWaitSeconds: { type: 'integer', minimum: 0, maximum: 60 },
    auditUnauthenticatedLimit: positive,
    auditUnauthenticatedTotalLimit: positive,
    auditAggregateWindowSeconds: positive,
    auditAllowedCounted: { type: 'array', items: { enum: AUDITED_PROTOCOL_ENDPOINTS } },
    auditAllowedUnrecorded: { type: 'array', items: { enum: AUDITED_PROTOCOL_ENDPOINTS } },
    auditRetentionMaxMb: { type: 'integer', minimum: 0 },
    httpRequestTimeoutMs: positive,
    httpHeadersTimeoutMs: positive,
    httpKeepAliveTimeoutMs: positive,
    workers: { type: ['integer', 'null'], minimum: 1, maximum: 256 },
    workerStandby: { type: 'boolean' },
    workerHeartbeatTimeoutMs: { type: 'integer', minimum: 2000, maximum: 600000 },
    heapGrowthPercent: { type: 'integer', minimum: 0, maximum: 300 },
    otlpEndpoint: { type: ['string', 'null'], pattern: '^https?://[^?#]+$' },
    otlpTracesEndpoint: { type: ['string', 'null'], pattern: '^https?://[^?#]+$' },
    serviceName: { type: 'string', minLength: 1, maxLength: 255 },
    tracingExportDelayMs: positive,
    tracingSampleRatio: { type: 'number', minimum: 0, maximum: 1 },
    ttl: {
      type: 'object',
      additionalProperties: false,
      properties: {
        accessTokenSeconds: positive,
        authorizationCodeSeconds: { type: 'integer', minimum: 1, maximum: 600 },
        refreshTokenSeconds: positive,
        idTokenSeconds: positive,
        sessionSeconds: positive,
        interactionSeconds: positive,
        permissionTicketSeconds: positive,
        deviceCodeSeconds: { type: 'integer', minimum: 1, maximum: 1800 },
      },
    },
  },
} as const;

const SCHEMA_TYPES: Record<string, string> = Object.fromEntries([
  ...Object.entries(SCHEMA.properties).map(([key, value]) => [key, typeOf(value)]),
  ...Object.entries(SCHEMA.properties.ttl.properties).map(([key, value]) => [`ttl.${key}`, typeOf(value)]),
]);

function typeOf(schema: object): string {
  const type = 'type' in schema ? schema.type : 'string';
  return Array.isArray(type) ? type[0] : String(type);
}

export class ConfigError extends Error {}

let compiledSchema: ValidateFunction | undefined;

/** The configuration schema compiled once per process (about 25 ms of CPU each time: every test server loads a configuration). */
function configValidator(): ValidateFunction {
  compiledSchema ??= new Ajv({ allErrors: false }).compile(SCHEMA);
  return compiledSchema;
}

/** Reads config/default.json, applies environment overrides, validates; throws ConfigError naming the key. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  defaultsFile = projectPath('config', 'default.json'),
): Config {
  const raw = JSON.parse(readFileSync(defaultsFile, 'utf8')) as RawConfig;
  if (env.CONFIG_FILE) overlay(raw, readConfigFile(env.CONFIG_FILE));
  for (const [variable, key] of Object.entries(ENVIRONMENT)) {
    const value = env[variable];
    if (value === undefined || value === '') continue;
    const parsed = parseValue(variable, value, SCHEMA_TYPES[key]);
    if (key.startsWith('ttl.')) raw.ttl[key.slice(4)] = parsed;
    else raw[key] = parsed;
  }
  const validate = configValidator();
  if (!validate(raw)) throw new ConfigError(`invalid configuration: ${configProblem(validate.errors?.[0], raw)}`);
  const production = env.NODE_ENV === 'production';
  if ((raw.policyPollMaxSeconds as number) < (raw.policyPollMinSeconds as number)) {
    throw new ConfigError('invalid configuration: POLICY_POLL_MAX_SECONDS must be >= POLICY_POLL_MIN_SECONDS');
  }
  // Node refuses a headers timeout longer than the request timeout it is part of.
  if ((raw.httpHeadersTimeoutMs as number) > (raw.httpRequestTimeoutMs as number)) {
    throw new ConfigError('invalid configuration: HTTP_HEADERS_TIMEOUT_MS must be <= HTTP_REQUEST_TIMEOUT_MS');
  }
  checkListeners(raw);
  checkTls(raw);
  const workers = workerCount(raw);
  if (!raw.adminApiKey && production) {
    throw new ConfigError('invalid configuration: SERVICE_ADMIN_API_KEY is required when NODE_ENV=production');
  }
  if (!raw.secretsKey && production) {
    throw new ConfigError(
      'invalid configuration: SERVICE_SECRETS_KEY (32 random bytes, base64url) is required when NODE_ENV=production',
    );
  }
  const port = raw.port as number;
  return {
    ...(raw as unknown as Config),
    issuer: (raw.issuer as string | null) ?? `http://localhost:${port}`,
    policyBundleToken: (raw.policyBundleToken as string | null) ?? randomBytes(24).toString('base64url'),
    adminApiKey: (raw.adminApiKey as string | null) ?? randomBytes(24).toString('base64url'),
    adminApiKeyGenerated: !raw.adminApiKey,
    adminBindAddress:
      raw.adminPort === null ? null : ((raw.adminBindAddress as string | null) ?? DEFAULT_ADMIN_BIND_ADDRESS),
    production,
    outboundAllowInsecureLoopback: (raw.outboundAllowInsecureLoopback as boolean | null) ?? !production,
    // An external OPA may hold more than Arbiter's bundle; only the managed one is known to hold exactly it.
    policyRegoInProcess: (raw.policyRegoInProcess as boolean | null) ?? !raw.opaUrl,
    workers,
    otlpTracesEndpoint: tracesEndpoint(raw),
  };
}

/**
 * WORKERS, or the cores this process may use. An in-memory SQLite store belongs to one process:
 * several workers would each have a store of their own, so that takes one worker (and an
 * explicit WORKERS above 1 with it is refused).
 */
function workerCount(raw: Record<string, unknown>): number {
  const inMemory = raw.storeUrl === 'sqlite::memory:';
  const workers = raw.workers as number | null;
  if (workers === null || workers === undefined) return inMemory ? 1 : availableParallelism();
  if (inMemory && workers > 1)
    throw new ConfigError(
      'invalid configuration: WORKERS must be 1 with STORE_URL=sqlite::memory: (each worker would have a store of its own)',
    );
  return workers;
}

type RawConfig = Record<string, unknown> & { ttl: Record<string, unknown> };

/**
 * CONFIG_FILE: a JSON file outside the checkout with any of config/default.json's keys (the same
 * names, `ttl` as an object of its own); what it leaves out keeps its default, and environment
 * variables still win over it.
 */
function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`invalid configuration: CONFIG_FILE ${file} cannot be read (${(error as Error).message})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`invalid configuration: CONFIG_FILE ${file} is not JSON${whereJsonFailed(text, error)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError(`invalid configuration: CONFIG_FILE ${file} must hold a JSON object`);
  return parsed as Record<string, unknown>;
}

/**
 * Where JSON.parse stopped, as a line and column, never its message: V8 quotes the text around the
 * fault, and a configuration's text holds secrets (found 2026-11-30: `"adminApiKey": s3cr3t-adm`
 * was printed in the fatal start-up line).
 */
function whereJsonFailed(text: string, error: unknown): string {
  const position = /position (\d+)/.exec((error as Error).message)?.[1];
  if (position === undefined) return '';
  const before = text.slice(0, Number(position)).split('\n');
  return ` (at line ${before.length}, column ${before.at(-1)!.length + 1})`;
}

/** Puts the file's values over the defaults; `ttl` key by key, so a file may name one lifetime. */
function overlay(raw: RawConfig, file: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(file)) {
    if (key === 'ttl' && typeof value === 'object' && value !== null && !Array.isArray(value))
      Object.assign(raw.ttl, value);
    else raw[key] = value;
  }
}

/**
 * The OTLP/HTTP traces URL as OpenTelemetry's exporter specification derives it: the signal's own
 * endpoint as given, else the base endpoint with `v1/traces` appended to its path.
 */
function tracesEndpoint(raw: Record<string, unknown>): string | null {
  const traces = (raw.otlpTracesEndpoint as string | null | undefined) ?? null;
  const base = (raw.otlpEndpoint as string | null | undefined) ?? null;
  if (traces) return traces;
  return base ? `${base.replace(/\/+$/, '')}/v1/traces` : null;
}

/** Without ADMIN_BIND_ADDRESS the admin listener is reachable from this host only. */
const DEFAULT_ADMIN_BIND_ADDRESS = '127.0.0.1';

/** Bind addresses are IP literals (a host name may resolve to several, or to another family); two listeners need two ports. */
function checkListeners(raw: Record<string, unknown>): void {
  for (const key of ['bindAddress', 'adminBindAddress']) {
    const address = raw[key];
    if (typeof address === 'string' && isIP(address) === 0)
      throw new ConfigError(
        `invalid configuration: ${variableFor(key)} must be an IP address, such as 0.0.0.0 or :: (every interface) or 127.0.0.1, not ${JSON.stringify(address)}`,
      );
  }
  const adminPort = (raw.adminPort as number | null | undefined) ?? null;
  raw.adminPort = adminPort;
  if (adminPort === null && raw.adminBindAddress)
    throw new ConfigError('invalid configuration: ADMIN_BIND_ADDRESS needs ADMIN_PORT (the admin listener it is for)');
  if (adminPort !== null && adminPort !== 0 && adminPort === raw.port)
    throw new ConfigError(
      'invalid configuration: ADMIN_PORT must differ from PORT (the admin listener is a second one)',
    );
}

/**
 * TLS on the public listener needs its key, and the admin listener: the admin surface and the
 * managed OPA's bundle polls stay on plain HTTP there. A client CA is for one of the two sources
 * of client certificates (src/oauth/mtls).
 */
function checkTls(raw: Record<string, unknown>): void {
  if (Boolean(raw.tlsCertFile) !== Boolean(raw.tlsKeyFile))
    throw new ConfigError('invalid configuration: TLS_CERT_FILE and TLS_KEY_FILE go together');
  if (raw.tlsCertFile && raw.adminPort === null)
    throw new ConfigError(
      'invalid configuration: TLS_CERT_FILE needs ADMIN_PORT (the Admin API and the policy bundle stay on plain HTTP there)',
    );
  if (raw.tlsClientCaFile && !raw.tlsCertFile && !raw.mtlsCertificateHeader)
    throw new ConfigError(
      'invalid configuration: TLS_CLIENT_CA_FILE needs TLS_CERT_FILE or MTLS_CERTIFICATE_HEADER (where client certificates come from)',
    );
  if (raw.mtlsEndpointBaseUrl && !raw.tlsCertFile && !raw.mtlsCertificateHeader)
    throw new ConfigError(
      'invalid configuration: MTLS_ENDPOINT_BASE_URL needs TLS_CERT_FILE or MTLS_CERTIFICATE_HEADER (where client certificates come from)',
    );
  if (typeof raw.mtlsCertificateHeader === 'string')
    raw.mtlsCertificateHeader = raw.mtlsCertificateHeader.toLowerCase();
}

/**
 * Settings that start but are unsafe where they are: each a line for the start-up log (`warn`).
 * A production issuer on plain http sends codes, tokens and cookies in clear and breaks the
 * issuer's https requirement (RFC 8414 §2, OAuth 2.1 §1.5).
 */
export function configWarnings(config: Pick<Config, 'production' | 'issuer' | 'metricsToken' | 'adminPort'>): string[] {
  const warnings: string[] = [];
  if (config.production && config.issuer.startsWith('http://'))
    warnings.push(
      `ISSUER is ${config.issuer} with NODE_ENV=production: the issuer must be https:// (RFC 8414 §2), else codes, ` +
        'tokens and cookies cross the network in clear. Serve Arbiter behind TLS and set ISSUER to its https:// URL',
    );
  if (config.production && config.metricsToken === null)
    warnings.push(
      `METRICS_TOKEN is not set with NODE_ENV=production: GET /metrics answers anyone who reaches ${config.adminPort === null ? 'the server' : 'the admin listener (ADMIN_PORT)'} ` +
        '(request rates, clients refused, policy decisions). Set METRICS_TOKEN and give Prometheus the same as its bearer token',
    );
  return warnings;
}

function parseValue(variable: string, value: string, type: string | undefined): unknown {
  if (type === 'integer') {
    if (!/^-?\d+$/.test(value)) throw new ConfigError(`invalid configuration: ${variable} must be an integer`);
    return Number(value);
  }
  if (type === 'number') {
    if (!/^-?(\d+\.?\d*|\.\d+)$/.test(value))
      throw new ConfigError(`invalid configuration: ${variable} must be a number`);
    return Number(value);
  }
  if (type === 'array')
    return value
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean);
  if (type === 'object') {
    try {
      return JSON.parse(value) as unknown;
    } catch (error) {
      throw new ConfigError(`invalid configuration: ${variable} must be a JSON object${whereJsonFailed(value, error)}`);
    }
  }
  if (type === 'boolean') {
    if (!/^(true|false)$/i.test(value))
      throw new ConfigError(`invalid configuration: ${variable} must be true or false`);
    return value.toLowerCase() === 'true';
  }
  return value;
}

function variableFor(key: string): string {
  return Object.entries(ENVIRONMENT).find(([, k]) => k === key)?.[0] ?? key;
}

/** What a pattern asks for, in words, for the settings that have one. */
export const PATTERN_HINTS: Record<string, string> = {
  issuer: 'an http:// or https:// URL without a query, a fragment or a trailing slash',
  storeUrl: 'sqlite:<file>, sqlite::memory:, postgres://… (postgresql://…) or mongodb://… (mongodb+srv://…)',
  opaUrl: 'an http:// or https:// URL',
  trustedProxies: 'an IP address or a CIDR range (10.0.0.0/8, ::1)',
  mtlsCertificateHeader: 'a header name (letters, digits and "-")',
  mtlsEndpointBaseUrl: 'an https:// URL without a query, a fragment or a trailing slash',
  tenants: '1 to 64 letters, digits, ".", "-" or "_", starting with a letter or digit',
  dpopNonceTenants: 'a tenant id, `_default` or `*`',
  fapi2SecurityTenants: 'a tenant id, `_default` or `*`',
  secretsKey: '32 random bytes in base64url (43 characters)',
  secretsKeyPrevious: '32 random bytes in base64url (43 characters)',
  otlpEndpoint:
    "an http:// or https:// URL without a query or a fragment (the collector's OTLP/HTTP port, often :4318)",
  otlpTracesEndpoint: 'an http:// or https:// URL without a query or a fragment (…/v1/traces)',
};

/**
 * One schema error as the operator set it: the environment variable's name (an item of a list
 * by its position, `TRUSTED_PROXIES item 2`), and what is allowed (the values of a choice, what
 * a pattern means). A list item's value is shown; no other value is, as it may be a secret.
 */
function configProblem(error: ErrorObject | undefined, raw: Record<string, unknown>): string {
  if (!error) return 'the configuration is invalid';
  const segments = error.instancePath.split('/').filter(Boolean);
  const item = /^\d+$/.test(segments.at(-1) ?? '') ? Number(segments.pop()) : null;
  const key =
    segments.join('.') ||
    String('additionalProperty' in error.params ? error.params.additionalProperty : 'the configuration');
  const setting =
    item === null
      ? variableFor(key)
      : `${variableFor(key)} item ${item + 1} (${JSON.stringify((raw[key] as unknown[] | undefined)?.[item])})`;
  if (error.keyword === 'enum')
    return `${setting} must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
  if (error.keyword === 'pattern' && PATTERN_HINTS[key]) return `${setting} must be ${PATTERN_HINTS[key]}`;
  if (error.keyword === 'additionalProperties') return `${setting} is not a known setting`;
  return `${setting} ${error.message ?? 'is invalid'}`;
}
