import Router from '@koa/router';
import { randomBytes } from 'node:crypto';
import type { Next } from 'koa';
import type { ArbiterContext, ArbiterMiddleware, OAuthRequestState } from '../state.js';
import type Provider from 'oidc-provider';
import type { InteractionResults } from 'oidc-provider';
import type { Config } from '../../config/index.js';
import { secureCookie } from '../../http/cookies.js';
import { badRequest } from '../../http/errors.js';
import { outboundOptionsOf } from '../../http/outbound.js';
import type { Logger } from '../../log/index.js';
import { storageDigest, type Sealer, type Store } from '../../store/index.js';
import type { TenantProviders } from '../providers.js';
import { grantConsent } from './consent.js';
import { SignInError } from './errors.js';
import { finishInteraction, interactionOf, type Interaction } from './interaction.js';
import {
  chooseIdentityProvider,
  enabledIdentityProviderCount,
  identityProviderById,
  UPSTREAM_IDP_PARAM,
} from './identity-providers.js';
import { INTERACTION_PATH, interactionPath } from './slice.js';
import { unmetRequirement, upstreamHints } from './requirements.js';
import { rememberSubject } from './subjects.js';
import { newChecks, UpstreamProviders } from './upstream.js';
import { requestIssuer } from '../../tenancy/index.js';
import { UpstreamSessions } from './upstream-sessions.js';
import { UpstreamLogins, type ClaimedLogin } from './upstream-logins.js';
import { receiveUpstreamLogout, UPSTREAM_LOGOUT_PATH } from './upstream-logout.js';
import { formBody } from '../shared/form-body.js';

export interface InteractionDeps {
  config: Config;
  store: Store;
  /** Opens the identity providers' sealed client secrets. */
  sealer: Sealer;
  providers: TenantProviders;
  log: Logger;
}

/**
 * The upstream providers redirect here, each to its own path below it: register
 * `{issuer}/idp/callback/{idpId}` with each of them (for a tenant signed in at /t/<tenant>,
 * `{issuer}/t/<tenant>/idp/callback/{idpId}`: its own issuer's). A provider whose record says
 * `sharedCallback` uses this path itself, as every provider did before.
 */
export const UPSTREAM_CALLBACK_PATH = '/idp/callback';
const UPSTREAM_DONE = 'upstream-done';
/** Prompts answered by signing in upstream (see slice.ts for select_account). */
const SIGN_IN_PROMPTS = new Set(['login', 'select_account']);

/**
 * Arbiter's sign-in, in three steps of one browser journey:
 *
 * 1. GET /interaction/:uid — oidc-provider needs a login: redirect to the tenant's upstream
 *    provider (state, nonce, PKCE). Consent needs no screen: it is granted here.
 * 2. GET /idp/callback — the upstream answers: redeem its code, keep the subject, record the outcome.
 * 3. GET /interaction/:uid/upstream-done — back under the interaction cookie's path: hand
 *    the outcome to oidc-provider, which resumes the authorization request.
 *
 * Every failure after step 1 reaches the client as an authorization error at its
 * redirect_uri (and in the audit entry of the request that sends it there, see audit.ts); only
 * a request that cannot be tied to an interaction is answered here (400). Mount before the providers.
 */
export function interactionRoutes(deps: InteractionDeps): ArbiterMiddleware {
  const upstream = new UpstreamProviders({ outbound: outboundOptionsOf(deps.config) });
  const router = new Router<OAuthRequestState>();
  router.use(uncached);
  router.get(`${INTERACTION_PATH}/:uid`, (ctx) => answerPrompt(ctx, deps, upstream));
  router.get(UPSTREAM_CALLBACK_PATH, (ctx) => receiveUpstreamResponse(ctx, deps, upstream));
  router.get(`${UPSTREAM_CALLBACK_PATH}/:idp`, (ctx) => receiveUpstreamResponse(ctx, deps, upstream));
  router.get(`${INTERACTION_PATH}/:uid/${UPSTREAM_DONE}`, (ctx) => completeSignIn(ctx, deps));
  router.post(UPSTREAM_LOGOUT_PATH, formBody(deps.config.maxBodyBytes), (ctx) =>
    receiveUpstreamLogout(ctx, deps, upstream),
  );
  return router.routes() as ArbiterMiddleware;
}

async function answerPrompt(ctx: ArbiterContext, deps: InteractionDeps, upstream: UpstreamProviders): Promise<void> {
  const { interaction } = await openInteraction(ctx, deps.providers);
  try {
    const prompt = interaction.prompt.name;
    if (prompt === 'consent') return await finish(ctx, interaction, grantConsent());
    if (!SIGN_IN_PROMPTS.has(prompt))
      throw new SignInError('interaction_required', `Arbiter cannot satisfy the ${prompt} prompt`);
    ctx.redirect((await sendUpstream(ctx, deps, upstream, interaction)).href);
  } catch (error) {
    await finish(ctx, interaction, signInFailure(ctx, error, deps.log));
  }
}

/** Picks the tenant's provider, remembers the round trip, and returns where the browser goes. */
async function sendUpstream(
  ctx: ArbiterContext,
  deps: InteractionDeps,
  upstream: UpstreamProviders,
  interaction: Interaction,
): Promise<URL> {
  const { params, uid } = interaction;
  const idp = await chooseIdentityProvider(deps.store, deps.sealer, ctx.state.tenant.name, params[UPSTREAM_IDP_PARAM]);
  const checks = newChecks();
  const redirectUri = callbackOf(ctx, deps, idp.sharedCallback ? undefined : idp.idpId);
  const destination = await upstream.authorizationUrl(idp, redirectUri, checks, upstreamHints(interaction));
  const browser = randomBytes(32).toString('base64url');
  await new UpstreamLogins(deps.store, ctx.state.tenant.name).begin(uid, idp.id, redirectUri, checks, browser);
  ctx.cookies.set(browserCookieName(checks.state), browser, browserCookie(ctx, deps, UPSTREAM_LOGIN_COOKIE_MS));
  return destination;
}

/** As long as an upstream login is kept (upstream-logins.ts). */
const UPSTREAM_LOGIN_COOKIE_MS = 10 * 60_000;

/**
 * The browser binding of an upstream sign-in: a random value in a cookie only the callback path
 * sees, its digest kept with the login, so that the callback redeems the code only for the
 * browser that was sent upstream. Found 2026-11-29: the state alone bound it, so an attacker who
 * began a sign-in and had a victim open its upstream URL (a genuine link of the identity
 * provider) got the victim's sign-in finished in the attacker's interaction: the victim's account
 * at the client, and a session as the victim (session swapping, RFC 9700 §4.7). One cookie per
 * sign-in (named after its state's digest), so that sign-ins in two tabs each finish.
 */
function browserCookieName(state: string): string {
  return `_upstream~${storageDigest(state).slice(0, 16)}`;
}

function browserCookie(ctx: ArbiterContext, deps: InteractionDeps, maxAge: number) {
  return {
    path: new URL(callbackOf(ctx, deps)).pathname,
    httpOnly: true,
    // Sent on the identity provider's top-level redirect back here.
    sameSite: 'lax',
    secure: secureCookie(ctx, deps.config.issuer),
    maxAge,
    overwrite: true,
  } as const;
}

async function receiveUpstreamResponse(
  ctx: ArbiterContext,
  deps: InteractionDeps,
  upstream: UpstreamProviders,
): Promise<void> {
  const { state } = ctx.query;
  if (typeof state !== 'string' || state === '') throw badRequest("the identity provider's response carries no state");
  const logins = new UpstreamLogins(deps.store, ctx.state.tenant.name);
  const cookie = browserCookieName(state);
  const login = await logins.claim(state, ctx.cookies.get(cookie));
  ctx.cookies.set(cookie, '', browserCookie(ctx, deps, 0));
  if (!login)
    throw badRequest(
      'this sign-in is unknown, expired, already completed or was begun in another browser; start again from the application',
    );
  // Found 2026-11-29: every provider came back to one callback, so a provider of the tenant could
  // send the browser on to another with the state of a sign-in begun at itself, and have that
  // one's code (and the PKCE verifier) redeemed at its own token endpoint (mix-up, RFC 9700 §4.4).
  const arrivedAt = callbackOf(ctx, deps, ctx.params.idp);
  const mixUp =
    arrivedAt !== (login.redirectUri ?? callbackOf(ctx, deps))
      ? "the identity provider's response came back to another provider's callback"
      : await unattributable(ctx, deps, arrivedAt);
  const outcome = mixUp
    ? signInFailure(ctx, new SignInError('access_denied', mixUp), deps.log)
    : await upstreamOutcome(ctx, deps, upstream, login, arrivedAt);
  await logins.finish(state, outcome);
  ctx.redirect(`${interactionPath(login.uid)}/${UPSTREAM_DONE}`);
}

/**
 * Why a response at the shared callback cannot be told to come from the provider it claims:
 * with several providers in the tenant and no `iss` (RFC 9207, which openid-client checks when
 * given), another provider of the tenant kept on the shared callback could have sent the browser
 * on to an honest one, whose code (and the PKCE verifier) would be redeemed at its own token
 * endpoint (found 2026-11-29: the per-provider callbacks protect a provider only while no other
 * of its tenant keeps the shared one). Null when it can.
 */
async function unattributable(ctx: ArbiterContext, deps: InteractionDeps, arrivedAt: string): Promise<string | null> {
  if (arrivedAt !== callbackOf(ctx, deps) || typeof ctx.query.iss === 'string') return null;
  if ((await enabledIdentityProviderCount(deps.store, ctx.state.tenant.name)) < 2) return null;
  return "the identity provider's response at the shared callback does not say who sent it (iss, RFC 9207), and the tenant has several providers: give this one its own callback (sharedCallback: false)";
}

/** The interaction result this upstream response leads to: the signed-in subject, or an authorization error. */
async function upstreamOutcome(
  ctx: ArbiterContext,
  deps: InteractionDeps,
  upstream: UpstreamProviders,
  login: ClaimedLogin,
  redirectUri: string,
): Promise<InteractionResults> {
  const { store } = deps;
  try {
    const idp = await identityProviderById(store, deps.sealer, ctx.state.tenant.name, login.identityProviderId);
    // openid-client takes the redirect_uri for the code exchange from this URL.
    const callbackUrl = new URL(`${redirectUri}?${ctx.querystring}`);
    const identity = await upstream.identity(idp, callbackUrl, login.checks);
    const accountId = await rememberSubject(
      { store, tenant: ctx.state.tenant.name, tenantId: ctx.state.tenant.id },
      idp,
      identity,
    );
    if (identity.sid)
      await new UpstreamSessions(store, ctx.state.tenant.name).remember(
        idp.id,
        identity.sid,
        accountId,
        deps.config.ttl.sessionSeconds,
      );
    deps.log.info({ tenant: ctx.state.tenant.name, idp: idp.idpId, sub: accountId }, 'upstream sign-in completed');
    // The upstream sign-in also settles a requested select_account prompt. Its acr is the
    // session's, which oidc-provider puts in the ID token (src/oauth/claims.ts).
    return { login: { accountId, ...(identity.acr ? { acr: identity.acr } : {}) }, select_account: {} };
  } catch (error) {
    return signInFailure(ctx, error, deps.log);
  }
}

async function completeSignIn(ctx: ArbiterContext, deps: InteractionDeps): Promise<void> {
  const { interaction } = await openInteraction(ctx, deps.providers);
  const outcome = await new UpstreamLogins(deps.store, ctx.state.tenant.name).take(interaction.uid);
  if (!outcome)
    throw badRequest('this sign-in has no upstream result (already used or expired); start again from the application');
  const unmet = outcome.login ? unmetRequirement(interaction, outcome.login) : undefined;
  await finish(ctx, interaction, unmet ? signInFailure(ctx, unmet, deps.log) : outcome);
}

/**
 * Where the upstream sends the browser back: below the issuer the sign-in runs under (the tenant's
 * own at /t/<tenant>), the provider's own path (`idpId`) or the shared one.
 */
function callbackOf(ctx: ArbiterContext, { config }: InteractionDeps, idpId?: string): string {
  const shared = `${requestIssuer(config.issuer, ctx.state.tenant)}${UPSTREAM_CALLBACK_PATH}`;
  return idpId === undefined ? shared : `${shared}/${encodeURIComponent(idpId)}`;
}

/** The tenant's provider and the browser's interaction with it. */
async function openInteraction(
  ctx: ArbiterContext,
  providers: TenantProviders,
): Promise<{ provider: Provider; interaction: Interaction }> {
  const provider = providers.provider(ctx.state.tenant);
  return { provider, interaction: await interactionOf(ctx, provider) };
}

/** Hands the result to oidc-provider and sends the browser back to the authorization request. */
async function finish(ctx: ArbiterContext, interaction: Interaction, result: InteractionResults): Promise<void> {
  // Consent builds on the login of the previous round, as oidc-provider's own forms do.
  ctx.status = 303;
  ctx.redirect(await finishInteraction(interaction, result, 'consent' in result));
}

/** A sign-in failure as the client will see it; anything else is a fault of Arbiter's. */
function signInFailure(ctx: ArbiterContext, error: unknown, log: Logger): InteractionResults {
  if (!(error instanceof SignInError)) throw error;
  const { tenant, requestId } = ctx.state;
  log.warn(
    { tenant: tenant.name, requestId, error: error.error, reason: error.description, cause: causeOf(error.cause) },
    'upstream sign-in failed',
  );
  return error.result;
}

/** Names and codes only: openid-client errors may carry upstream responses. (Not `code`: the log redacts that name.) */
function causeOf(cause: unknown): Record<string, unknown> | undefined {
  if (!(cause instanceof Error)) return undefined;
  return { name: cause.name, message: cause.message, errorCode: (cause as { code?: unknown }).code };
}

/** Sign-in responses carry state and redirect to codes: never cached. */
async function uncached(ctx: ArbiterContext, next: Next): Promise<void> {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Pragma', 'no-cache');
  await next();
}
