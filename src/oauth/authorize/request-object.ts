import { decodeJwt } from 'jose';
import type { Next } from 'koa';
import type Provider from 'oidc-provider';
import type { ConfigurationSlice } from '../context.js';
import { REQUEST_OBJECT_SIGNING_ALGS } from '../../catalog/index.js';
import { MAX_JSON_DEPTH, nestingExceeds } from '../../http/body.js';
import { HttpError, shownName } from '../../http/errors.js';
import { assertShallowJson } from '../shared/form-body.js';
import type { ArbiterContext } from '../state.js';
import type { Tenant } from '../../tenancy/index.js';

/** RFC 9126 §2.2: the request_uri of a pushed authorization request (oidc-provider's PUSHED_REQUEST_URN). */
const PUSHED_REQUEST_URN = 'urn:ietf:params:oauth:request_uri:';

/**
 * RFC 9101 request objects through oidc-provider: `request` by value at /authorize and /par,
 * verified with the client's registered public keys (`jwks`, or `jwks_uri` fetched through the
 * outbound module: outbound-fetch.ts) and only with the asymmetric algorithms of routes.ts. An
 * unsigned (`alg: none`) request object is refused: it adds nothing a query string does not, and
 * RFC 9101 §10.2 lets a server refuse it; a client that wants its parameters kept from the
 * browser pushes them to /par instead. By reference only through PAR (its own urn), never a URL
 * of the client's. The request object's parameters replace the query's entirely (RFC 9101 §5:
 * oidc-provider drops every parameter beside it), so the `authorize` decision is asked about
 * what the client signed.
 */
export const requestObjects: ConfigurationSlice = () => ({
  features: { requestObjects: { enabled: true, requireSignedRequestObject: false } },
  enabledJWA: { requestObjectSigningAlgValues: [...REQUEST_OBJECT_SIGNING_ALGS] },
});

/**
 * Arbiter's checks in front of oidc-provider (redirect_uri required, the tenant's scopes made
 * known, RAR with resource or scope refused) read the parameters a request is decided on. When a
 * request carries a request object or a pushed request's request_uri, those are the request
 * object's, not the query's: this step reads them into `ctx.state.requestObject` (null when they
 * cannot be read: oidc-provider then refuses the request itself). The JWT is decoded without
 * verifying it: oidc-provider verifies it before any decision, and what Arbiter's checks do with
 * it can only refuse a request or make a scope of the tenant's vocabulary known.
 */
export function readRequestObject(providerFor: (tenant: Tenant) => Provider) {
  return async (ctx: ArbiterContext, next: Next): Promise<void> => {
    const sent = (ctx.method === 'POST' ? ctx.state.body : ctx.query) ?? {};
    if (typeof sent.request === 'string') {
      ctx.state.requestObject = parametersOf(sent.request);
    } else if (typeof sent.request_uri === 'string') {
      ctx.state.requestObject = await pushedParameters(providerFor(ctx.state.tenant), sent.request_uri);
    }
    if (ctx.state.requestObject) assertShallowJson(ctx.state.requestObject);
    await next();
  };
}

/** The parameters of a pushed request (RFC 9126 §4), whatever its state; null when there is no such request. */
async function pushedParameters(provider: Provider, requestUri: string): Promise<Record<string, unknown> | null> {
  if (!requestUri.startsWith(PUSHED_REQUEST_URN)) return null;
  const pushed = await provider.PushedAuthorizationRequest.find(requestUri.slice(PUSHED_REQUEST_URN.length), {
    ignoreExpiration: true,
  });
  return pushed ? parametersOf(pushed.request) : null;
}

/** A request object's claims as authorization request parameters, the way oidc-provider reads them (process_request_object.js). */
function parametersOf(jwt: string): Record<string, unknown> | null {
  assertShallowPayload(jwt);
  let payload: Record<string, unknown>;
  try {
    payload = decodeJwt(jwt);
  } catch {
    return null;
  }
  return Object.fromEntries(Object.entries(payload).map(([name, value]) => [name, asParameter(name, value)]));
}

/**
 * Far beyond what a parameter may nest (MAX_JSON_DEPTH, checked on the parameters with the error
 * each names): this bound only keeps the payload from being parsed and re-serialized at all.
 */
const MAX_PAYLOAD_DEPTH = 8 * MAX_JSON_DEPTH;

/**
 * 400 for a request object nested beyond MAX_PAYLOAD_DEPTH, read as text before anything parses or
 * re-serializes it: JSON.stringify of a claims value nested a hundred thousand levels overflows the stack.
 */
function assertShallowPayload(jwt: string): void {
  const encoded = jwt.split('.')[1];
  if (encoded === undefined) return;
  if (nestingExceeds(Buffer.from(encoded, 'base64url').toString('utf8'), MAX_PAYLOAD_DEPTH))
    throw new HttpError(
      400,
      'invalid_request_object',
      `the request object nests arrays and objects deeper than ${MAX_PAYLOAD_DEPTH} levels`,
    );
}

/**
 * A claim as a parameter, the way oidc-provider reads one: a string as it is, `claims` and
 * `authorization_details` as JSON, an array as it is, anything else as `String(value)`. What that
 * would fail on is refused first. Found 2026-11-30: an object whose `toString` is no function made
 * `String(value)` throw, and an array of arrays in `resource` failed later: a 500 for anyone, as
 * the request object is read before its signature is checked. Other claims (an extension's object,
 * say) pass as oidc-provider takes them.
 */
function asParameter(name: string, value: unknown): unknown {
  if (typeof value === 'string') return value;
  if ((name === 'claims' || name === 'authorization_details') && typeof value === 'object' && value !== null)
    return JSON.stringify(value);
  if (Array.isArray(value)) {
    // RFC 8707: resource indicators are URIs.
    if (name === 'resource' && !value.every((item) => typeof item === 'string')) throw unreadable(name);
    return value;
  }
  if (value !== null && typeof value === 'object' && Object.hasOwn(value, 'toString')) throw unreadable(name);
  return String(value);
}

function unreadable(name: string): HttpError {
  return new HttpError(
    400,
    'invalid_request_object',
    `the request object's ${JSON.stringify(shownName(name))} cannot be read as a parameter`,
  );
}
