import type { Next } from 'koa';
import compose from 'koa-compose';
import type Provider from 'oidc-provider';
import { basicCredentials } from '../../http/basic.js';
import { HttpError } from '../../http/errors.js';
import type { Store } from '../../store/index.js';
import {
  acceptPlainPkce,
  readRequestObject,
  recognizeRequestedScopes,
  requireRedirectUri,
} from '../authorize/index.js';
import type { ConfigurationSlice } from '../context.js';
import { routes } from '../routes.js';
import { guardClientCredentials, presentsCredential } from '../shared/credential-guard.js';
import { formBody, formParameter } from '../shared/form-body.js';
import { REPEATABLE_PARAMETERS } from '../shared/resources.js';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';
import { addressBudget, type AddressLimits } from '../shared/address-budget.js';
import type { Tenant } from '../../tenancy/index.js';

export const PAR_PATH = routes.pushed_authorization_request;

/**
 * RFC 9126 through oidc-provider: a client pushes its authorization request to /par and gets a
 * single-use `urn:ietf:params:oauth:request_uri:…` valid for 60 seconds, which it sends to
 * /authorize with its client_id alone. Not required server-wide; a client registered with
 * `require_pushed_authorization_requests` (Admin API `requirePushedAuthorizationRequests`, or
 * dynamic registration) can use nothing else. oidc-provider keeps a pushed request with the
 * tenant's other artefacts, so a request_uri is usable only in the tenant that issued it, and by
 * the client that pushed it. At /authorize the pushed parameters replace the query's, and the
 * `authorize` decision is asked about them exactly as about a plain request (authorize/grant.ts).
 */
export const pushedAuthorizationRequests: ConfigurationSlice = () => ({
  features: {
    pushedAuthorizationRequests: {
      enabled: true,
      requirePushedAuthorizationRequests: false,
      // A pushed redirect_uri must be registered, as at /authorize.
      allowUnregisteredRedirectUris: false,
    },
  },
});

export interface ParDeps {
  store: Store;
  providerFor: (tenant: Tenant) => Provider;
  maxBodyBytes: number;
  /** SIGN_INS_PER_ADDRESS: what one address may push for public clients. */
  perAddress: AddressLimits;
}

/**
 * What Arbiter adds at /par in front of oidc-provider, in order: client authentication as at
 * /token (the form read with the size limit, a request that names no client refused, a client
 * that failed too often refused before its credentials are verified; oidc-provider then
 * authenticates it, and its registered method is enforced by authorize/parameters.ts), then the
 * checks /authorize makes of the pushed request (authorize/index.ts), so that what is pushed is
 * validated as what is sent to /authorize: redirect_uri required, PKCE `plain`, the client's
 * registered scopes. The parameter checks of parameters.ts run at /par too.
 * Only a POST pushes anything: any other method goes straight to oidc-provider (a 404).
 */
/**
 * The largest pushed request read. It is stored whole until it expires, for a public client named
 * by its client_id alone: at MAX_BODY_BYTES (1 MiB), 25 pushes a second kept 2 GB in the store. An
 * authorization request, RAR details and a request object included, is a few KB.
 */
const PAR_MAX_BODY_BYTES = 64 * 1024;

/** The push stored a request for a client that authenticates with nothing. */
function pushedForPublicClient(ctx: ArbiterContext): boolean {
  return ctx.status === 201 && ctx.oidc?.client?.clientAuthMethod === 'none';
}

export function parMiddleware({ store, providerFor, maxBodyBytes, perAddress }: ParDeps): ArbiterMiddleware[] {
  const steps = compose([
    formBody(Math.min(maxBodyBytes, PAR_MAX_BODY_BYTES), REPEATABLE_PARAMETERS),
    // A public client is named by its client_id alone: anyone may push for it (found 2026-11-29:
    // 248 pushes a second of 80 KB each kept 1.2 GB in the store from one address).
    addressBudget(perAddress, 'pushed requests for public clients', {
      // A wrong credential stores nothing (invalid_client): only a public client's request is counted.
      applies: (ctx) => !presentsCredential(ctx, false),
      made: pushedForPublicClient,
    }),
    requireClient,
    guardClientCredentials,
    refuseRequestUri,
    readRequestObject(providerFor),
    requireRedirectUri,
    acceptPlainPkce,
    recognizeRequestedScopes(store, providerFor),
  ]) as ArbiterMiddleware;
  return [(ctx, next) => (ctx.method === 'POST' ? steps(ctx, next) : next())];
}

/**
 * RFC 9126 §2: the client authenticates at /par as at the token endpoint. A request that names
 * no client at all (no Basic credentials, no client_id, no client assertion) is an
 * authentication failure, 401 invalid_client (RFC 6749 §5.2), not oidc-provider's 400.
 */
async function requireClient(ctx: ArbiterContext, next: Next): Promise<void> {
  const named =
    basicCredentials(ctx.get('authorization')) !== undefined ||
    formParameter(ctx, 'client_id') !== undefined ||
    formParameter(ctx, 'client_assertion') !== undefined;
  if (!named) {
    ctx.set('WWW-Authenticate', 'Basic realm="arbiter", charset="UTF-8"');
    throw new HttpError(401, 'invalid_client', 'client authentication is required at /par');
  }
  await next();
}

/**
 * RFC 9126 §2.1: a pushed request carries its parameters itself, never a `request_uri`. That is a
 * malformed request (invalid_request), not the OpenID Connect `request_uri_not_supported`
 * oidc-provider would answer without saying why.
 */
async function refuseRequestUri(ctx: ArbiterContext, next: Next): Promise<void> {
  if (ctx.state.body?.request_uri !== undefined)
    throw new HttpError(
      400,
      'invalid_request',
      'request_uri must not be sent to /par (RFC 9126 §2.1): push the authorization request parameters themselves',
      { field: 'request_uri' },
    );
  await next();
}
