import type { Next, ParameterizedContext } from 'koa';
import { AUDITED_PROTOCOL_ENDPOINTS } from '../config/index.js';
import { isAdminPath, SIGN_IN_CALLBACK_PATH, SIGN_IN_PATH, SIGN_OUT_PATH } from '../http/admin-path.js';
import { basicCredentials } from '../http/basic.js';
import type { RequestState } from '../http/state.js';
import type { Logger } from '../log/index.js';
import { boundedEntry } from './bounds.js';
import { collectingIssued, withdrawAll, type Withdrawal } from './issued.js';
import type { AuditFacts, AuditState } from './facts.js';
import { CONSOLE_HEADER } from './entry.js';
import type { AuditFields, AuditLog, Outcome } from './log.js';
import { bodyParams, summarizeRequest } from './summary.js';

/**
 * What the audit log reads of a request: its own part of the state, the HTTP layer's and the
 * tenant's, when the request has one (tenantUnknown: counted, not written; src/tenancy).
 */
type Context = ParameterizedContext<
  RequestState & AuditState & { tenant?: { id: string | null }; tenantUnknown?: boolean }
>;

/** The console's sign-ins (made, refused) and sign-outs: sessions of the Admin API, as its keys are. */
const CONSOLE_SESSION_PATHS = [SIGN_IN_PATH, SIGN_IN_CALLBACK_PATH, SIGN_OUT_PATH];

/** Every Admin API call (refused ones and every spelling of its paths included), console sign-in and every protocol request. */
export function isAudited(path: string): boolean {
  if (isAdminPath(path) || CONSOLE_SESSION_PATHS.includes(path)) return true;
  return AUDITED_PROTOCOL_ENDPOINTS.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}

/**
 * Records one entry per audited request, after it has been answered and before the answer goes
 * out: the caller is answered once its entry is stored (in a batch shared with concurrent
 * requests, see AuditLog), so a crash cannot lose the entry of an answered request. Mounted
 * outside the JSON error handler so that it sees the status the caller got, not the one a
 * handler had set before it threw.
 *
 * No answer goes out without its entry: when the entry cannot be written (the store is down,
 * full or locked), the caller gets a 503 `temporarily_unavailable` with Retry-After instead of
 * what the request produced, and every credential the request stored (token, code, pushed
 * request: see withdrawableCredentials) is deleted again. The one exception is by design: a
 * refusal counted into an aggregated entry (below) is answered at once, its count written at the
 * window's end.
 *
 * Every decision and every authenticated caller's request is recorded in full. A caller nobody
 * authenticated cannot make the log grow at will: its strings are cut (boundedEntry), and its
 * requests beyond a per-address budget, refused (a 4xx, or an authorization error sent to the
 * redirect_uri) or allowed without a decision (a browser's first GET /authorize), or naming a
 * tenant that does not exist, are counted into one aggregated entry per address and window
 * (AuditLog.appendRefusal, appendAllowedUnauthenticated).
 */
export function auditTrail(audit: AuditLog, log: Logger) {
  return async function audited(ctx: Context, next: Next): Promise<void> {
    if (!isAudited(ctx.path)) return next();
    const facts: AuditFacts = {};
    ctx.state.audit = facts;
    const issued: Withdrawal[] = [];
    try {
      await collectingIssued(issued, next);
    } finally {
      await record(audit, ctx, facts).catch((error: unknown) => answerUnrecorded(ctx, issued, error, log));
    }
  };
}

/** How long a caller whose request could not be audited is asked to wait before it tries again. */
const UNRECORDED_RETRY_AFTER_SECONDS = 5;

/**
 * The request's entry was not written: its answer is replaced by a 503 (a redirect carrying a
 * code loses its Location too) and what it issued is withdrawn. Were the withdrawal to fail as
 * well (the store is gone), the credential is still unusable: its value was only in the answer
 * that is not sent, and the store keeps a digest of it, never the value.
 */
async function answerUnrecorded(ctx: Context, issued: Withdrawal[], error: unknown, log: Logger): Promise<void> {
  const withdrawn = await withdrawAll(issued);
  log.error(
    { err: error, requestId: ctx.state.requestId, path: ctx.path, status: ctx.status, issued: issued.length },
    'audit write failed: answered 503 instead, what the request issued withdrawn',
  );
  if (withdrawn.failed > 0)
    log.error(
      { err: withdrawn.reason, requestId: ctx.state.requestId },
      `${withdrawn.failed} credentials of an unaudited request not deleted (their values were never sent)`,
    );
  ctx.remove('Location');
  // Nor a cookie: a console session it opened is withdrawn (and its sign-out cookie needs no clearing to be dead).
  ctx.remove('Set-Cookie');
  if (!ctx.response.get('Retry-After')) ctx.set('Retry-After', String(UNRECORDED_RETRY_AFTER_SECONDS));
  ctx.set('Cache-Control', 'no-store');
  // A 503 already says what is unavailable (the store, usually the reason the entry failed too).
  if (ctx.status === 503) return;
  ctx.body = { error: 'temporarily_unavailable', error_description: unrecordedDescription(ctx) };
  ctx.status = 503;
  ctx.state.errorCode = 'temporarily_unavailable';
}

/**
 * What the 503 of an unrecorded request says happened. Only credentials are withdrawn: an Admin
 * write stays made (found 2026-11-29: it was said "not carried out", and a retry met a conflict).
 */
function unrecordedDescription(ctx: Context): string {
  if (isAdminPath(ctx.path) && !['GET', 'HEAD'].includes(ctx.method))
    return 'the audit log could not record this request, but what it changed is stored: look before you retry';
  if (ctx.path === SIGN_OUT_PATH) return 'the session has ended, but the audit log could not record it';
  return 'the audit log could not record this request, so what it issued was withdrawn and not sent; retry later';
}

async function record(audit: AuditLog, ctx: Context, facts: AuditFacts): Promise<unknown> {
  const entry = entryFor(ctx, facts);
  const protocolAllowed = entry.outcome === 'allow' && !isAdminPath(ctx.path);
  // An allowed protocol request is recorded as AUDIT_ALLOWED_COUNTED / AUDIT_ALLOWED_UNRECORDED say; refusals and Admin API calls always.
  if (isAuthenticated(ctx, facts)) return protocolAllowed ? audit.appendAllowed(entry) : audit.append(entry);
  const bounded = boundedEntry(entry);
  // Nobody authenticated (a browser's GET /authorize, a refusal): within the per-address and node budgets.
  if (protocolAllowed) return audit.appendAllowedUnauthenticated(bounded);
  const refused = ctx.status < 500 && (ctx.status >= 400 || entry.outcome === 'deny');
  if (refused) return audit.appendRefusal(bounded, ctx.state.tenantUnknown === true);
  return audit.append(bounded);
}

/** oidc-provider's endpoints that authenticate the client (a public client's bare client_id is no credential). */
const CLIENT_AUTHENTICATING_ROUTES = new Set([
  'token',
  'introspection',
  'revocation',
  'pushed_authorization_request',
  'backchannel_authentication',
  'device_authorization',
]);

interface OidcFacts {
  route?: string;
  entities?: { Client?: { clientAuthMethod?: string }; AccessToken?: unknown; RegistrationAccessToken?: unknown };
}

/**
 * As the request said (markAuthenticated, markUnauthenticated); else a decision was asked for, or
 * a credential was accepted by oidc-provider.
 */
function isAuthenticated(ctx: Context, facts: AuditFacts): boolean {
  if (facts.authenticated !== undefined) return facts.authenticated;
  if (facts.policyInput !== undefined || facts.policyDecision !== undefined) return true;
  if (ctx.status === 401) return false;
  const oidc = (ctx as unknown as { oidc?: OidcFacts }).oidc;
  const entities = oidc?.entities ?? {};
  return (
    clientAuthenticated(ctx, oidc?.route, entities.Client) ||
    Boolean(entities.AccessToken || entities.RegistrationAccessToken)
  );
}

/**
 * oidc-provider names the client before it checks the credential: a wrong one is a 401; only a
 * request carrying client attestation headers can still fail (400) after that, and Arbiter
 * enables no attestation method, so such a request never authenticated.
 */
function clientAuthenticated(
  ctx: Context,
  route: string | undefined,
  client: { clientAuthMethod?: string } | undefined,
): boolean {
  if (!client || client.clientAuthMethod === 'none' || !route || !CLIENT_AUTHENTICATING_ROUTES.has(route)) return false;
  return ctx.get('oauth-client-attestation') === '' && ctx.get('oauth-client-attestation-pop') === '';
}

function entryFor(ctx: Context, facts: AuditFacts): AuditFields {
  return {
    endpoint: ctx.path,
    method: ctx.method,
    requestSummary: {
      ...summarizeRequest(ctx),
      ...(facts.adminKey ? { adminKey: facts.adminKey } : {}),
      status: ctx.status,
      ...(ctx.state.errorCode ? { error: ctx.state.errorCode } : {}),
      ...(facts.result ? { result: facts.result } : {}),
    },
    policyInput: facts.policyInput ?? null,
    policyDecision: facts.policyDecision ?? null,
    outcome: facts.outcome ?? outcomeOf(ctx.status),
    tenantId: facts.tenantId !== undefined ? facts.tenantId : (ctx.state.tenant?.id ?? null),
    clientId: facts.clientId ?? clientIdOf(ctx),
    subjectId: facts.subjectId ?? null,
    ip: ctx.ip || null,
    userAgent: ctx.get('user-agent') || null,
    requestId: ctx.state.requestId ?? null,
    ...(isConsoleRead(ctx, facts) ? { consoleRead: true } : {}),
  };
}

/** A read the console made for itself: its header on a successful GET (or HEAD) that a valid Admin key made. */
function isConsoleRead(ctx: Context, facts: AuditFacts): boolean {
  return (
    ctx.get(CONSOLE_HEADER) === '1' &&
    (ctx.method === 'GET' || ctx.method === 'HEAD') &&
    facts.adminKey !== undefined &&
    ctx.status < 400 &&
    isAdminPath(ctx.path)
  );
}

function outcomeOf(status: number): Outcome {
  if (status >= 500) return 'error';
  return status >= 400 ? 'deny' : 'allow';
}

function clientIdOf(ctx: Context): string | null {
  // An Admin call names its client itself (facts.clientId), never as the caller spells a parameter
  // (found 2026-11-29: DELETE /admin/api/clients/victim?client_id=decoy was filed under decoy).
  if (isAdminPath(ctx.path)) return null;
  const oidcClient = (ctx as unknown as { oidc?: { client?: { clientId?: string } } }).oidc?.client?.clientId;
  return oidcClient ?? stringParam(ctx, 'client_id') ?? basicUsername(ctx.get('authorization'));
}

/** client_id as the caller named it, also when authentication failed (from the query or the parsed form). */
function stringParam(ctx: Context, name: string): string | null {
  const value = ctx.query[name] ?? (bodyParams(ctx) as Record<string, unknown>)[name];
  return typeof value === 'string' && value !== '' ? value : null;
}

/** The client id of a Basic Authorization header, also when its secret is wrong. */
function basicUsername(authorization: string): string | null {
  return basicCredentials(authorization)?.id || null;
}
