import type { Next, ParameterizedContext } from 'koa';
import type { Logger } from '../log/index.js';
import { withLogFields } from '../log/index.js';
import { accessLogLine } from './access-log.js';
import { RETRY_AFTER_SECONDS } from './errors.js';
import { trustedCaller } from './forwarded.js';
import { assignRequestId } from './request-id.js';
import { asRequestBegunNow } from './request-start.js';
import { securityHeaders } from './security-headers.js';
import type { RequestState } from './state.js';

export interface RequestFrameOptions {
  log: Logger;
  /** ACCESS_LOG: one line per answered request. */
  accessLog: boolean;
  /** TRUSTED_PROXIES: the peers whose forwarded headers are believed. */
  trustedProxies: string[];
  /** Headers believed from those proxies alone besides the forwarded ones (MTLS_CERTIFICATE_HEADER). */
  proxyHeaders?: readonly string[];
  /** ISSUER is https: requests are taken as https unless a trusted proxy says otherwise (trustedCaller). */
  httpsIssuer?: boolean;
}

/**
 * The first step of every request (src/routes.ts), what it is before any route: when it began
 * (requestBegunAt, for reads shared between requests), its id (in
 * X-Request-ID and every log line written while it is answered), its caller's address (forwarded
 * headers believed from trusted proxies only), the headers every answer carries (security
 * headers; Retry-After on a 503 that named no time) and its access-log line.
 */
export function requestFrame({ log, accessLog, trustedProxies, proxyHeaders, httpsIssuer }: RequestFrameOptions) {
  const logLine = accessLogLine(log, accessLog);
  const trust = trustedCaller(trustedProxies, proxyHeaders, httpsIssuer);
  return function request(ctx: ParameterizedContext<RequestState>, next: Next): Promise<void> {
    return asRequestBegunNow(() => answer(ctx, next));
  };

  async function answer(ctx: ParameterizedContext<RequestState>, next: Next): Promise<void> {
    const requestId = assignRequestId(ctx);
    trust(ctx);
    logLine?.(ctx);
    try {
      await securityHeaders(ctx, () => (validHost(ctx.host) ? withLogFields({ requestId }, next) : refuseHost(ctx)));
    } finally {
      // RFC 9110 §10.2.3: whoever answered the 503 (the JSON error handler, oidc-provider, a probe), the caller learns when to retry.
      if (ctx.status === 503 && !ctx.response.get('Retry-After')) ctx.set('Retry-After', RETRY_AFTER_SECONDS);
    }
  }
}

/**
 * Whether the request's host (its Host header, or a trusted proxy's X-Forwarded-Host) can be one:
 * oidc-provider builds its URLs from it (new URL), so `[::1`, `a b` or `x:99999` would fail every
 * page and discovery with a 500. No host at all (HTTP/1.0) is left to the routes.
 */
function validHost(host: string): boolean {
  if (host === '') return true;
  try {
    return new URL(`http://${host}`).host !== '';
  } catch {
    return false;
  }
}

async function refuseHost(ctx: ParameterizedContext<RequestState>): Promise<void> {
  ctx.status = 400;
  ctx.body = { error: 'invalid_request', error_description: 'the Host header is not a valid host' };
}
