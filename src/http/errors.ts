import type { Next, ParameterizedContext } from 'koa';
import type { Logger } from '../log/index.js';
import { isAdminPath } from './admin-path.js';
import type { RequestState } from './state.js';

/** An error whose status and OAuth-style code are meant for the caller. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    description: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(description);
    this.name = 'HttpError';
  }
}

export const badRequest = (description: string, details?: Record<string, unknown>) =>
  new HttpError(400, 'invalid_request', description, details);

/** A name the caller chose, as an answer names it back: cut to 64 characters (a refusal never echoes a whole body). */
export function shownName(name: string): string {
  return name.length > 64 ? `${name.slice(0, 64)}…` : name;
}
export const notFound = (description = 'not found') => new HttpError(404, 'not_found', description);
/** A method a protocol endpoint does not take: 405 `method_not_allowed` with the Allow header naming those it does. */
export function methodNotAllowed(ctx: { set(field: string, value: string): void }, allowed: string): HttpError {
  ctx.set('Allow', allowed);
  return new HttpError(405, 'method_not_allowed', `use ${allowed}`);
}

/** A method an API path does not offer (UMA 2.0 Federated Authorization §3.3 names the code). */
export const unsupportedMethod = () =>
  new HttpError(405, 'unsupported_method_type', 'the endpoint does not support this HTTP method');

/**
 * A dependency that cannot answer now, such as a store that lost its database (StoreUnavailableError,
 * src/store/types.ts, which sits above this module): `reason` says what happened and what to do.
 * Recognised by shape, so that one from a second copy of its module is recognised too.
 */
/** What a caller of a protocol endpoint is told of a store failure (the reason goes to the log). */
export const STORE_UNAVAILABLE_FOR_CALLERS = 'the store is unavailable: retry later';

export interface Unavailable {
  readonly status: 503;
  readonly error: 'temporarily_unavailable';
  /** What cannot answer, for the log line: "store". */
  readonly dependency: string;
  readonly reason: string;
  /** When to try again, sent as Retry-After. */
  readonly retryAfterSeconds?: number;
}

export function isUnavailable(error: unknown): error is Error & Unavailable {
  const fields = error as Partial<Unavailable> | null;
  return (
    error instanceof Error &&
    fields?.status === 503 &&
    fields.error === 'temporarily_unavailable' &&
    typeof fields.dependency === 'string' &&
    typeof fields.reason === 'string'
  );
}

/**
 * A dependency that cannot answer, as an HttpError (its description is what the caller is told):
 * answered 503 with its code and description, logged once with its reason (which may say more
 * than the caller is told), never as an unexpected error with a stack.
 */
export class DependencyUnavailableError extends HttpError implements Unavailable {
  declare readonly status: 503;
  readonly error = 'temporarily_unavailable';

  constructor(
    readonly dependency: string,
    description: string,
    readonly reason: string = description,
    readonly retryAfterSeconds?: number,
    code = 'temporarily_unavailable',
  ) {
    super(503, code, description);
    this.name = 'DependencyUnavailableError';
  }
}

/**
 * A dependency that cannot answer, shaped like oidc-provider's own errors (`message` is the OAuth
 * error code, `error_description` the text, `statusCode` and `expose` set), so that the endpoints
 * oidc-provider answers itself (/token, /userinfo, a client lookup) also say 503
 * temporarily_unavailable rather than 500 server_error. The stack is a single line: the reason is
 * the whole story, and logs stay readable.
 */
export class UnavailableToProvider extends Error implements Unavailable {
  readonly status = 503;
  readonly statusCode = 503;
  readonly expose = true;
  readonly error = 'temporarily_unavailable';

  /**
   * @param reason what happened and what to do, for the log and the Admin API's operators
   * @param error_description what a caller of a protocol endpoint is told
   */
  constructor(
    readonly dependency: string,
    readonly reason: string,
    readonly error_description: string,
    readonly retryAfterSeconds?: number,
  ) {
    super('temporarily_unavailable');
    // The subclass's name (StoreUnavailableError, …), which recognisers of a second module copy compare.
    this.name = new.target.name;
    this.stack = `${this.name}: ${reason}`;
  }
}

/** How long a caller is asked to wait after a 503 that named no time of its own (requestFrame). */
export const RETRY_AFTER_SECONDS = '1';

/**
 * Turns any error thrown below into a JSON body `{error, error_description}`; unexpected
 * errors become a 500 whose details go only to the log, never a stack trace to the caller.
 * An Unavailable dependency is a 503 and one plain log line: its reason says what happened
 * and what to do, a stack would add nothing. `check` refuses (throws) what no route below takes
 * (src/http/parameters.ts: a U+0000 in the URL), answered the same way.
 */
export function jsonErrors(log: Logger, check: (ctx: ParameterizedContext<RequestState>) => void = () => {}) {
  return async function errors(ctx: ParameterizedContext<RequestState>, next: Next): Promise<void> {
    try {
      check(ctx);
      await next();
    } catch (error) {
      const { status, body } = describe(error, isAdminPath(ctx.path));
      if (isUnavailable(error) && error.retryAfterSeconds !== undefined)
        ctx.set('Retry-After', String(error.retryAfterSeconds));
      if (isUnavailable(error))
        log.error(
          { path: ctx.path, method: ctx.method, requestId: ctx.state.requestId },
          `${error.dependency} unavailable: ${error.reason}`,
        );
      else if (status >= 500)
        log.error({ err: error, path: ctx.path, requestId: ctx.state.requestId }, 'unhandled error');
      ctx.status = status;
      ctx.body = body;
      ctx.state.errorCode = String(body.error);
    }
  };
}

/**
 * The answer to an error. A dependency's failure says why to the Admin API's operators; a store's
 * reason may name its file, host or driver, so a protocol caller gets a fixed description of it.
 */
function describe(error: unknown, forOperators: boolean): { status: number; body: Record<string, unknown> } {
  if (error instanceof HttpError) {
    return { status: error.status, body: { error: error.code, error_description: error.message, ...error.details } };
  }
  if (isUnavailable(error)) {
    const description = error.dependency === 'store' && !forOperators ? STORE_UNAVAILABLE_FOR_CALLERS : error.reason;
    return { status: 503, body: { error: 'temporarily_unavailable', error_description: description } };
  }
  const status = (error as { status?: number; expose?: boolean })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code = status === 404 ? 'not_found' : status === 405 ? 'method_not_allowed' : 'invalid_request';
    return { status, body: { error: code, error_description: (error as Error).message } };
  }
  return { status: 500, body: { error: 'server_error', error_description: 'an unexpected error occurred' } };
}
