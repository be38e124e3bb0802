/**
 * What each setting means, by its environment variable: the words of the configuration
 * reference, which `npm run docs:config` (scripts/config-reference.ts) writes to
 * docs/configuration-reference.md with each setting's type and limits from the schema and its
 * default from config/default.json. Markdown, with links relative to docs/. `unset` says what a
 * setting whose default is null does when it is left unset. A setting without a description
 * here fails the reference's test, so the manual never lags behind the schema.
 */
export interface SettingDescription {
  meaning: string;
  unset?: string;
}

export const SETTING_DESCRIPTIONS: Readonly<Record<string, SettingDescription>> = {
  PORT: { meaning: 'HTTP port' },
  BIND_ADDRESS: {
    meaning: "the public listener's address, an IP literal (`0.0.0.0`, `::`, `127.0.0.1`, `10.0.0.5`)",
    unset: 'every interface',
  },
  ADMIN_PORT: {
    meaning:
      'a second listener for the Admin API, the console and `/metrics`, which then answer 404 on `PORT` (see [The admin listener](operations.md#the-admin-listener)); `0` picks a free port',
    unset: 'one listener for everything',
  },
  ADMIN_BIND_ADDRESS: {
    meaning:
      "the admin listener's address (only with `ADMIN_PORT`); `0.0.0.0` in a container whose admin port only the operators' network reaches",
    unset: '`127.0.0.1`',
  },
  ADMIN_SIGN_IN_IDP: {
    meaning:
      'the `idpId` of an identity provider of the default tenant through which operators sign in to the console (OpenID Connect, code flow with PKCE); their role and tenants come from `ADMIN_SIGN_IN_GRANTS` (see [Signing operators in](administration.md#signing-operators-in))',
    unset: 'the console takes Admin API keys only',
  },
  ADMIN_SIGN_IN_CLAIM: {
    meaning:
      "the claim of the operator's ID token (or UserInfo) whose values `ADMIN_SIGN_IN_GRANTS` maps (a string or a list of strings, e.g. `groups`)",
  },
  ADMIN_SIGN_IN_GRANTS: {
    meaning:
      'JSON: claim value → `{"role": "<role>", "tenants": ["<tenant>", …]}`; the first value of the claim that has a grant decides; an operator with none is refused (403)',
  },
  ADMIN_SESSION_SECONDS: { meaning: 'how long a console sign-in lasts (its cookie and the session in the store)' },
  ISSUER: { meaning: 'issuer URL (no trailing slash)', unset: '`http://localhost:$PORT`' },
  STORE_URL: {
    meaning:
      "`sqlite:<file>`, `sqlite::memory:` or `mongodb://…`. A SQLite file's directory must exist (else the start stops, naming it), so that a mistyped or unmounted path never starts an empty store; only the default `data/` of the project is made on first start",
  },
  STORE_SQLITE_LOCK_WAIT_MS: {
    meaning:
      "how long a write to a SQLite store waits for another connection's write lock (another worker, the command line), answering other requests meanwhile, before it is answered `503 temporarily_unavailable` ([Workers](operations.md#workers))",
  },
  OPA_URL: { meaning: 'an external OPA', unset: 'a managed local OPA is run' },
  OPA_BIN: { meaning: 'the binary of the managed OPA', unset: '`.bin/opa`, then `opa` on PATH' },
  OPA_TOKEN: {
    meaning:
      '`Authorization: Bearer` token for an external OPA run with `--authentication=token`; the managed OPA (on 127.0.0.1) always requires a random token of its own',
  },
  OPA_HEALTH_CHECK_INTERVAL_MS: {
    meaning:
      "how often the managed OPA's health is asked (each answer within 1 s); after 3 answers missed in a row it counts as hung and is killed and restarted ([Failures](operations.md#failures-stopping-and-crashing))",
  },
  POLICY_POLL_MIN_SECONDS: {
    meaning:
      'the shortest interval at which OPA polls the bundle when it cannot long poll (the managed OPA long polls: a change is in force within about a second)',
  },
  POLICY_POLL_MAX_SECONDS: {
    meaning: 'the longest such interval; at least `POLICY_POLL_MIN_SECONDS`',
  },
  POLICY_BUNDLE_TOKEN: {
    meaning: 'bearer token that protects `GET /policy/bundle.tar.gz`',
    unset: 'random per start',
  },
  POLICY_DECISION_TIMEOUT_MS: {
    meaning:
      "the time a decision may take, OPA's or in process: past it, a deny (fail closed, `503 temporarily_unavailable` naming the point and the limit); a decision not yet proven cheap is evaluated in a decision thread that is ended at the limit ([policy.md](policy.md#rego-in-process)); a policy write whose trial decides one of its inputs slower than this (as OPA times it) is refused with a 400 naming the input",
  },
  POLICY_DECISION_MEMORY_MB: {
    meaning:
      'the memory of a decision thread: its JavaScript heap, and the Wasm memory of the compiled Rego module it evaluates; a decision that needs more fails closed (`503`), rather than growing the process',
  },
  POLICY_REGO_IN_PROCESS: {
    meaning:
      "evaluate Rego in the server's process from the bundle compiled to WebAssembly by OPA; OPA answers whatever that cannot decide exactly as OPA would ([policy.md](policy.md#rego-in-process))",
    unset: 'true with the managed OPA, false with `OPA_URL`',
  },
  POLICY_LAG_BOUND_SECONDS: {
    meaning:
      "`/readyz` and `/healthz` are degraded (503) once OPA has served an older revision than the store's for longer",
  },
  POLICY_FAULT_WINDOW_SECONDS: {
    meaning:
      "`/healthz` is degraded (503) while more than half of a decision point's decisions in this window failed for the policy's own error ([Safe policy changes](policy.md#safe-policy-changes))",
  },
  CLOCK_SKEW_LIMIT_SECONDS: {
    meaning:
      "`/readyz` is unavailable (503, `clock` says why) while this node's clock and the store server's differ by more than this (a shared MongoDB store; an embedded store has no other clock)",
  },
  CLOCK_CHECK_INTERVAL_SECONDS: {
    meaning:
      "how often the clock is compared with the store server's (and once at start); the skew is logged when it crosses the limit and exported as `arbiter_clock_skew_seconds`",
  },
  POLICY_CHECK_RECORDED_INPUTS: {
    meaning:
      "a policy change is tried on this many recent distinct inputs per decision point from the audit log, besides the contract's examples (0: the examples only)",
  },
  POLICY_HISTORY_VERSIONS: { meaning: 'versions kept per policy rule and data entry (list, diff, roll back)' },
  POLICY_SHADOW_SAMPLE_RATE: {
    meaning:
      'the fraction (0 to 1) of live decisions also evaluated against the shadow policy ([Changing policy safely](policy.md#changing-policy-safely))',
  },
  POLICY_SHADOW_QUEUE: {
    meaning:
      'live decisions waiting for the shadow evaluation beyond this many are dropped and counted (`arbiter_policy_shadow_dropped_total`)',
  },
  POLICY_REPLAY_SHARE: {
    meaning:
      'the most of the event loop a replay (impact analysis, shadow evaluation) takes while requests being answered wait for it; otherwise it runs at full speed',
  },
  POLICY_OPA_CONCURRENCY: {
    meaning:
      'OPA command runs (rule checks, trial runs, Wasm builds, replays through OPA) at once per process ([Policy code runs sandboxed](policy.md#policy-code-runs-sandboxed))',
  },
  POLICY_OPA_QUEUE_MS: {
    meaning:
      'an OPA command run that found none of the `POLICY_OPA_CONCURRENCY` runs free within this wait is answered 503 `policy evaluation is busy, retry`',
  },
  POLICY_OPA_TIMEOUT_MS: {
    meaning: 'an OPA command run taking longer is killed: the write or check is refused with a 400 naming the limit',
  },
  POLICY_OPA_MEMORY_MB: {
    meaning:
      'an OPA command run whose resident memory grows past this is killed: the write or check is refused with a 400 naming the limit',
  },
  POLICY_RULE_MAX_BYTES: {
    meaning: 'the largest policy rule (Rego or Cedar) a write may store: beyond, a 400 naming the limit',
  },
  POLICY_BUNDLE_MAX_BYTES: {
    meaning: 'the largest bundle a write may make (every bundled rule and data entry): beyond, a 400 naming the limit',
  },
  POLICY_SANDBOX_TIMEOUT_MS: {
    meaning:
      "policy code an operator submits (a Cedar rule's parse check, a candidate's Cedar trial, the Rego and Cedar of impact analysis and shadow evaluation) runs in worker threads: one job (a rule, a trial, 100 decisions) that takes longer has its thread ended and replaced ([Limits](policy.md#limits-of-submitted-policy-code))",
  },
  POLICY_SANDBOX_MEMORY_MB: {
    meaning:
      'the memory of such a thread: its JavaScript heap, and the Wasm memory of each compiled Rego module it loads',
  },
  POLICY_SANDBOX_THREADS: {
    meaning:
      'such threads per process: at most this many jobs at once; up to 64 more wait, each at most three time limits, then 503',
  },
  SERVICE_ADMIN_API_KEY: {
    meaning:
      'the bootstrap Admin API key (role admin, named `bootstrap` in the audit log; named keys are made with it, see [Keys and roles](administration.md#keys-and-roles)); required when `NODE_ENV=production`',
    unset: 'random per start (printed)',
  },
  SERVICE_SOFTWARE_STATEMENT_VERIFY: { meaning: 'verify software statement signatures at registration' },
  SERVICE_REGISTRATION_CIMD_ALLOW_INSECURE_LOCALHOST: {
    meaning: 'accept `http://localhost` client ID metadata URLs',
  },
  SERVICE_REGISTRATION_CIMD_NEGATIVE_CACHE_SECONDS: {
    meaning:
      'a client ID metadata document URL that named no usable document (unknown, unreachable, invalid) is refused this long without being fetched again, so that a bad client_id cannot make Arbiter fetch on every request (see [Client ID metadata documents](endpoints.md#client-id-metadata-documents))',
  },
  SERVICE_REGISTRATION_CIMD_MAX_DOCUMENT_BYTES: {
    meaning:
      'the largest client ID metadata document fetched; a larger one names no usable client (the draft suggests 5 KB; some clients publish more), so that no one can make Arbiter keep large records by naming documents (see [Client ID metadata documents](endpoints.md#client-id-metadata-documents))',
  },
  SERVICE_REGISTRATION_CIMD_MAX_CLIENTS: {
    meaning:
      'the most client ID metadata document clients a tenant keeps at once (each lasts 24 hours after its last use); a new document client beyond is refused (`invalid_client`, logged) until some expire, so that naming new document URLs cannot fill the store',
  },
  LOG_LEVEL: { meaning: 'pino level (`silent` to mute)' },
  ACCESS_LOG: {
    meaning:
      'one JSON line per answered request (at `info`), see [Logs](operations.md#probes-logs-and-policy-propagation)',
  },
  MAX_BODY_BYTES: { meaning: 'largest accepted JSON body (413 beyond)' },
  SSF_RECEIVER_MAX_AGE_SECONDS: {
    meaning:
      "a Security Event Token an identity provider's transmitter pushes is refused when its `iat` is older than this (a transmitter's retries included); its `jti` is remembered as long, to refuse a replay (see [Receiving signals](signals.md#receiving-signals-from-an-identity-provider))",
  },
  DELEGATIONS_PER_OWNER: {
    meaning:
      'the most delegations one owner (a user, or a client without one) keeps; revoked and expired ones count until they are deleted, 7 days after; one more is refused with 409 (see [UMA](uma.md))',
  },
  UMA_RESOURCES_PER_OWNER: {
    meaning:
      'the most UMA resources one owner (a user, or a client without one) registers; one more is refused with 409 (see [UMA](uma.md))',
  },
  ACCESS_TOKEN_TTL_SECONDS: { meaning: 'access token lifetime' },
  AUTHORIZATION_CODE_TTL_SECONDS: { meaning: 'authorization code lifetime (at most 600)' },
  REFRESH_TOKEN_TTL_SECONDS: { meaning: 'refresh token lifetime (14 days)' },
  ID_TOKEN_TTL_SECONDS: { meaning: 'ID token lifetime' },
  SESSION_TTL_SECONDS: { meaning: 'sign-in session lifetime (14 days)' },
  INTERACTION_TTL_SECONDS: { meaning: 'how long a sign-in at the upstream IdP may take' },
  UMA_TICKET_TTL_SECONDS: { meaning: "UMA permission ticket lifetime (the spec's 5 minutes)" },
  DEVICE_CODE_TTL_SECONDS: {
    meaning:
      'RFC 8628 device code and user code lifetime (at most 1800), see [Device flow](standards.md#device-authorization-grant)',
  },
  TRUSTED_PROXIES: {
    meaning: 'comma-separated IPs or CIDR ranges whose `X-Forwarded-*` headers are believed',
  },
  TLS_CERT_FILE: {
    meaning:
      'PEM certificate (with its chain) of the public listener, which then speaks HTTPS and asks every client for a certificate without requiring one (RFC 8705 mutual TLS, see [standards.md](standards.md#mutual-tls-rfc-8705)); needs `TLS_KEY_FILE` and `ADMIN_PORT`',
    unset: 'plain HTTP (TLS terminated by a proxy)',
  },
  TLS_KEY_FILE: { meaning: 'PEM private key of `TLS_CERT_FILE`', unset: 'none' },
  TLS_CLIENT_CA_FILE: {
    meaning:
      "PEM certificates of the CAs that issue clients' certificates: a certificate they issued authenticates a client registered for `tls_client_auth` whose subject DN or SAN it carries",
    unset: '`tls_client_auth` not offered (`self_signed_tls_client_auth` still is)',
  },
  MTLS_CERTIFICATE_HEADER: {
    meaning:
      "the header in which a TLS-terminating proxy of `TRUSTED_PROXIES` forwards the client's certificate (PEM, URL-encoded PEM or base64 DER: nginx's `$ssl_client_escaped_cert`); removed from any other peer's requests. A trusted proxy's request comes with that certificate (or none), never with the one the proxy presents on its own connection",
    unset: 'no forwarded certificate believed',
  },
  MTLS_ENDPOINT_BASE_URL: {
    meaning:
      "RFC 8705 §5 `mtls_endpoint_aliases`: the https base URL (a host whose TLS terminator requires client certificates, reaching this server) under which discovery also names `/token`, `/revoke`, `/introspect`, `/userinfo`, `/par` and `/device/auth` (a path tenant's path added); needs `TLS_CERT_FILE` or `MTLS_CERTIFICATE_HEADER`",
    unset:
      'no aliases advertised: mTLS clients use the ordinary endpoints, which ask for a certificate and require none',
  },
  METRICS_TOKEN: {
    meaning:
      '`GET /metrics` requires `Authorization: Bearer <METRICS_TOKEN>` (at least 16 characters); give Prometheus the same as its `bearer_token`',
    unset: '`/metrics` open (warned at start in production)',
  },
  AUTH_FAILURE_LIMIT: {
    meaning:
      'failed credentials one address (or one credential at one address) may present per window, counted in the store for every node together',
  },
  AUTH_FAILURE_WINDOW_SECONDS: { meaning: 'the window of `AUTH_FAILURE_LIMIT`' },
  SIGN_INS_PER_ADDRESS: {
    meaning:
      'sign-ins one address (an IPv6 /64) may begin at `/authorize` per window, in each process: each stores its interaction until it ends or expires, so that one address cannot fill the store; past it `429 too_many_requests` with `Retry-After` (see [Endpoints](endpoints.md#get-authorize)). As many device codes (`/device/auth`) and pushed requests of public clients (`/par`), each counted on its own',
  },
  SIGN_INS_WINDOW_SECONDS: { meaning: 'the window of `SIGN_INS_PER_ADDRESS`' },
  OPEN_REGISTRATIONS_PER_ADDRESS: {
    meaning:
      'clients one address (an IPv6 /64) may register at `/register` without an initial access token per window, in each process, when open registration is on: each is kept for good, so that one address cannot fill the store; past it `429 too_many_requests` with `Retry-After` (see [Endpoints](endpoints.md#post-register))',
  },
  OPEN_REGISTRATIONS_WINDOW_SECONDS: { meaning: 'the window of `OPEN_REGISTRATIONS_PER_ADDRESS`' },
  OPEN_REGISTRATIONS_MAX_CLIENTS: {
    meaning:
      'clients registered at `/register` one tenant may hold before a registration without an initial access token is refused (registered clients never expire, and many addresses could otherwise fill the store): past it such a registration is `403 access_denied` until some are deleted, while registrations with an initial access token go on (see [Endpoints](endpoints.md#post-register))',
  },
  TENANTS: {
    meaning:
      'comma-separated tenant ids that exist without any Admin API object (see [multi-tenancy.md](multi-tenancy.md))',
  },
  DPOP_NONCE_TENANTS: {
    meaning:
      'comma-separated tenants whose DPoP proofs must carry a nonce of the server (RFC 9449 §8): `_default` for the default tenant, `*` for every tenant; none by default (see [standards.md](standards.md#dpop-nonces))',
  },
  FAPI2_SECURITY_TENANTS: {
    meaning:
      'comma-separated tenants whose every client is held to the FAPI 2.0 Security Profile (PAR, PKCE S256, DPoP-bound tokens, private_key_jwt, 60-second codes, PS256 ID tokens): `_default`, a tenant id or `*`; a single client opts in with its record\'s `profile: "fapi2-security"` (see [standards.md](standards.md#fapi-20-security-profile))',
  },
  TENANT_CACHE_MAX: {
    meaning:
      "at most this many tenants' oidc-provider instances (one per tenant and issuer form) and signing keys kept in memory (least recently used go first; each costs about 115 KB of heap)",
  },
  TENANT_IDLE_SECONDS: {
    meaning:
      "a tenant's providers and keys no request used for this long are let go, so the memory of tenants gone quiet returns; the next request builds them again (about 7 ms)",
  },
  OUTBOUND_ALLOW_INSECURE_LOOPBACK: {
    meaning: 'fetch operator- or client-supplied URLs over `http://` and at loopback addresses',
    unset: 'true, false with `NODE_ENV=production`',
  },
  OUTBOUND_TIMEOUT_MS: { meaning: 'the time limit of every outbound fetch of such a URL' },
  OUTBOUND_MAX_RESPONSE_BYTES: { meaning: 'the largest answer every outbound fetch of such a URL may read' },
  SERVICE_SECRETS_KEY: {
    meaning:
      "32 random bytes, base64url (`node -e \"console.log(require('crypto').randomBytes(32).toString('base64url'))\"`): seals the secrets Arbiter must read back; required when `NODE_ENV=production`",
    unset: 'a development key kept in the store',
  },
  SERVICE_SECRETS_KEY_PREVIOUS: {
    meaning:
      'the key secrets were sealed with before `SERVICE_SECRETS_KEY` changed: opens them until `arbiter rotate-secrets-key` has sealed them again ([Keys and backups](operations.md#keys-and-backups))',
  },
  SIGNING_KEY_REFRESH_SECONDS: {
    meaning: 'how often every node looks for signing keys rotated by `arbiter rotate-signing-key`',
  },
  AUDIT_RETENTION_DAYS: {
    meaning:
      'audit entries older than this are deleted in the background (every `PURGE_INTERVAL_SECONDS`), in paced steps; 0 keeps them forever',
  },
  PURGE_INTERVAL_SECONDS: {
    meaning:
      'how often a node purges expired tokens, codes, sessions and windows, then audit entries past their retention, in paced steps that never hold a request long (see [Purges](operations.md#purges-never-stall-requests))',
  },
  OUTBOX_POLL_MS: {
    meaning:
      'how often a node looks for outbox entries to deliver (Security Event Tokens) and for the delivery lease when no change of its own woke it (see [Signals](signals.md#delivery-guarantees))',
  },
  OUTBOX_LEASE_SECONDS: {
    meaning:
      'how long the outbox delivery lease lasts unrenewed: one node delivers at a time, and a node that dies holds delivery up for at most this long (see [Signals](signals.md#delivery-guarantees))',
  },
  OUTBOX_RETRY_MAX_SECONDS: {
    meaning:
      'the longest back-off between two attempts to deliver an outbox entry; it doubles from one second (see [Signals](signals.md#delivery-guarantees))',
  },
  BACKCHANNEL_LOGOUT_RETRY_MAX_SECONDS: {
    meaning:
      'how long a back-channel logout token that could not be delivered at once is tried again, through the outbox, before it is given up (counted as `givenUp` in `GET /admin/api/outbox`); a fresh token is signed at each attempt (see [Standards](standards.md#back-channel-logout-retries))',
  },
  SIGNALS_POLICY_RECHECK_MAX: {
    meaning:
      'the most live access tokens of a tenant decided again when the policy in force changes, to tell Shared Signals receivers of those now refused or narrower (0: none; see [Signals](signals.md#events-from-policy))',
  },
  SSF_POLL_WAIT_SECONDS: {
    meaning:
      'the longest an RFC 8936 poll without `returnImmediately` is held open waiting for a Security Event Token (see [Signals](signals.md#poll-delivery))',
  },
  AUDIT_UNAUTHENTICATED_LIMIT: {
    meaning:
      'requests of an unauthenticated address (refused, or allowed without a decision: a first GET /authorize) that get an audit entry each per window; the rest are counted in one aggregated entry (see [Audit log](administration.md#audit-log))',
  },
  AUDIT_UNAUTHENTICATED_TOTAL_LIMIT: {
    meaning:
      'the same for all addresses together, per node and window: past it, refusals are counted per endpoint and status in one node-wide entry (see [Audit log](administration.md#audit-log))',
  },
  AUDIT_AGGREGATE_WINDOW_SECONDS: {
    meaning:
      'the window of `AUDIT_UNAUTHENTICATED_LIMIT`, `AUDIT_UNAUTHENTICATED_TOTAL_LIMIT` and `AUDIT_ALLOWED_COUNTED`',
  },
  AUDIT_ALLOWED_COUNTED: {
    meaning:
      'protocol endpoints (comma-separated, e.g. `/introspect`) whose allowed requests are counted per window in one aggregated entry per tenant, client and endpoint rather than an entry each; refusals and Admin API calls always get their own (see [Audit log size](operations.md#audit-log-size))',
  },
  AUDIT_ALLOWED_UNRECORDED: {
    meaning:
      'protocol endpoints whose allowed requests get no audit entry at all (their decisions are then not replayed); refusals and Admin API calls are always recorded',
  },
  AUDIT_RETENTION_MAX_MB: {
    meaning:
      'the audit log is kept under about this many MB: past it, the oldest entries are deleted by the same paced purge as `AUDIT_RETENTION_DAYS`; 0: no bound (see [Audit log size](operations.md#audit-log-size))',
  },
  HTTP_REQUEST_TIMEOUT_MS: {
    meaning:
      "the whole request with its body must arrive within this; else Node answers 408 and closes the connection (a body trickled in a byte at a time no longer holds it for Node's default 300 s)",
  },
  HTTP_HEADERS_TIMEOUT_MS: {
    meaning: "a request's headers must arrive within this, else 408 as above; at most `HTTP_REQUEST_TIMEOUT_MS`",
  },
  HTTP_KEEP_ALIVE_TIMEOUT_MS: {
    meaning:
      'an idle kept-alive connection is closed after this (behind a load balancer: longer than its idle timeout)',
  },
  WORKERS: {
    meaning:
      'server processes sharing the port under one primary (see [Workers](operations.md#workers)); `1` runs the single process of old. More than 1 with `sqlite::memory:` is refused (each process would have a store of its own)',
    unset: 'the cores available (`os.availableParallelism()`); 1 with `sqlite::memory:`',
  },
  WORKER_STANDBY: {
    meaning:
      "with `WORKERS` above 1, one more worker process kept with its code loaded (it neither listens nor opens the store) to take a dead worker's place in about a second instead of a new worker's whole start (see [Workers](operations.md#workers)); it costs that process's memory (about 180 MB)",
  },
  WORKER_HEARTBEAT_TIMEOUT_MS: {
    meaning:
      'with `WORKERS` above 1, each worker tells the primary every second that its event loop runs; one silent this long (hung: a blocked loop, a stopped process) is killed and replaced as a dead one is, so that the connections the primary hands it are not left waiting (see [Workers](operations.md#workers))',
  },
  HEAP_GROWTH_PERCENT: {
    meaning:
      "after each full garbage collection, each server process's JavaScript heap may grow to (1 + this/100) times what it kept before V8 collects again (V8's `--heap-growing-percent`, set when the process starts); not a limit. `0`: V8's own choice, up to 4 times on a machine with several GB of memory, which with 1,000 tenants let a process reach 900 MB of RSS (see [scaling.md](scaling.md#many-tenants))",
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    meaning:
      "an OpenTelemetry collector's OTLP/HTTP base URL (`http://collector:4318`); spans go to its `/v1/traces` (see [Tracing](operations.md#tracing))",
    unset: 'no tracing',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    meaning: 'the traces URL itself, used as given; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`',
  },
  OTEL_SERVICE_NAME: { meaning: "the spans' `service.name`" },
  OTEL_BSP_SCHEDULE_DELAY: { meaning: 'spans are sent in batches, at most this many milliseconds after they end' },
  OTEL_TRACES_SAMPLER_ARG: {
    meaning:
      "the share (0 to 1) of the traces Arbiter starts itself that are recorded; a caller's `traceparent` decides for its own trace",
  },
};
