import compose from 'koa-compose';
import type Provider from 'oidc-provider';
import type { AuthFailureLimits } from '../../http/auth-failures.js';
import type { Store } from '../../store/index.js';
import { addressBudget, type AddressLimits } from '../shared/address-budget.js';
import type { Tenant } from '../../tenancy/index.js';
import { recognizeRequestedScopes } from '../authorize/index.js';
import type { ConfigurationSlice } from '../context.js';
import { clientCredentials, presentsCredential } from '../shared/credential-guard.js';
import { formBody } from '../shared/form-body.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';
import { methodNotAllowed } from '../../http/errors.js';
import { userCodeGuessLimit } from './guesses.js';
import { DEVICE_CODE_GRANT } from '../token/grants/token-input.js';
import { expiredFormPage, successSource, userCodeConfirmSource, userCodeInputSource } from './pages.js';
import { POLL_INTERVAL_SECONDS } from './polling.js';

/**
 * RFC 8628 through oidc-provider's deviceFlow: a client registered for the device code grant
 * (its `grant_types`) asks /device/auth for a device code and a user code; the user enters the
 * code at /device (pages.ts), confirms the client and scopes, and signs in through the upstream
 * identity provider as at /authorize (interactions/, the `authorize` decision as consent). The
 * device polls /token, where the `token` decision grants the tokens (polling.ts, token/grants).
 * User codes: 8 of 20 consonants (about 34 bits), `XXXX-XXXX`, guessed slowly (guesses.ts).
 */
export const deviceFlow: ConfigurationSlice = () => ({
  features: {
    deviceFlow: {
      enabled: true,
      charset: 'base-20',
      mask: '****-****',
      userCodeInputSource,
      userCodeConfirmSource,
      successSource,
    },
  },
});

export interface DeviceAuthorizationDeps {
  issuer: string;
  store: Store;
  providerFor: (tenant: Tenant) => Provider;
  maxBodyBytes: number;
  /** SIGN_INS_PER_ADDRESS: the device codes one address may ask for. */
  perAddress: AddressLimits;
}

/**
 * What Arbiter adds at /device/auth (RFC 8628 §3.1) in front of oidc-provider: client
 * authentication as at /token and /par (the form read with the size limit, a request naming no
 * client refused, a client that failed too often refused before verification), the client's
 * registered scopes made known as at /authorize; and the polling interval in the answer.
 */
export function deviceAuthorizationMiddleware({
  issuer,
  store,
  providerFor,
  maxBodyBytes,
  perAddress,
}: DeviceAuthorizationDeps): ArbiterMiddleware[] {
  const steps = compose([
    formBody(maxBodyBytes),
    // Each device code is stored 20 minutes, for anyone who names a public client (found
    // 2026-11-29: 500 a second from one address). An authenticated client's are its own business.
    addressBudget(perAddress, 'device authorization requests for public clients', {
      // A wrong credential stores nothing (invalid_client): only a public client's request is counted.
      applies: (ctx) => !presentsCredential(ctx, false),
      made: (ctx) => ctx.status === 200,
    }),
    clientCredentials({ issuer, publicClients: true, bearer: false }, { formsOnly: true }),
    recognizeRequestedScopes(store, providerFor),
    asDeviceAuthorizationAnswer,
  ]) as ArbiterMiddleware;
  return [
    (ctx, next) => {
      if (ctx.method === 'POST') return steps(ctx, next);
      // CORS preflights are oidc-provider's; anything else would reach its device sign-in's return (/device/:uid).
      if (ctx.method === 'OPTIONS') return next();
      throw methodNotAllowed(ctx, 'POST');
    },
  ];
}

/** What oidc-provider answers a client not registered for the grant (lib/actions/authorization/client.js). */
const NOT_REGISTERED = `${DEVICE_CODE_GRANT} is not allowed for this client`;

/**
 * RFC 8628 §3.2: the interval the device polls at, said outright (oidc-provider leaves it to the
 * default); a client not registered for the grant is unauthorized_client (RFC 6749 §5.2), which
 * oidc-provider calls invalid_request.
 */
const asDeviceAuthorizationAnswer: ArbiterMiddleware = async (ctx, next) => {
  await next();
  const body = ctx.body as Record<string, unknown> | undefined;
  if (ctx.status === 200 && body && typeof body.device_code === 'string') body.interval = POLL_INTERVAL_SECONDS;
  if (ctx.status === 400 && body?.error === 'invalid_request' && body.error_description === NOT_REGISTERED)
    body.error = 'unauthorized_client';
};

/** What Arbiter adds at /device, the user code page: slow user code guessing, forms of a known browser session. */
export function deviceVerificationMiddleware(
  limits: AuthFailureLimits,
  store: Store,
  providerFor: (tenant: Tenant) => Provider,
): ArbiterMiddleware[] {
  return [userCodeGuessLimit(limits, store), ofKnownSession(providerFor, ['POST'], (ctx) => ctx.path)];
}

/** What Arbiter adds at /device/:uid, where a device sign-in returns: a browser session it knows. */
export function deviceResumptionMiddleware(providerFor: (tenant: Tenant) => Provider): ArbiterMiddleware[] {
  return [ofKnownSession(providerFor, ['GET', 'HEAD'], (ctx) => ctx.path.replace(/\/[^/]*\/?$/, ''))];
}

/**
 * The code page's forms carry a CSRF token kept in the browser's oidc-provider session, and a
 * device sign-in returns (/device/:uid) to that session, so such a request without a live
 * session (no cookie, one nobody stored: a cross-site form, an expired one, a stray GET) can
 * never pass: it is answered 400 here, with a link to the code page. oidc-provider itself would
 * fail on it with a 500 (its error page touches a session it never stored, and persisting that
 * one throws).
 */
function ofKnownSession(
  providerFor: (tenant: Tenant) => Provider,
  methods: readonly string[],
  codePage: (ctx: ArbiterContext) => string,
): ArbiterMiddleware {
  return async (ctx, next) => {
    if (methods.includes(ctx.method)) {
      const provider = providerFor(ctx.state.tenant);
      const id = ctx.cookies.get(provider.cookieName('session'));
      if (!id || !(await provider.Session.find(id))) return expiredFormPage(ctx, codePage(ctx));
    }
    await next();
  };
}
