import { decodeJwt } from 'jose';
import type { Next } from 'koa';
import type { ArbiterContext, ArbiterMiddleware } from '../state.js';
import { basicCredentials } from '../../http/basic.js';
import { clientIdentity, guardCredential } from '../../http/auth-failures.js';
import { HttpError } from '../../http/errors.js';
import { formParameter } from './form-body.js';
import { requestIssuer } from '../../tenancy/index.js';
import { clientCertificatesOf, mtlsEnabled, type MtlsSettings } from '../mtls/index.js';

/**
 * At the endpoints where oidc-provider authenticates clients (/token, /introspect, /revoke, /par):
 * names the client whose credentials a request presents (Basic, or
 * client_secret / client_assertion in the form) to the failure limiter before oidc-provider
 * verifies them, so that a client that failed too often is refused without a verification that
 * would tell a guesser when they are right (src/http/auth-failures.ts). Mount after formBody.
 */
export async function guardClientCredentials(ctx: ArbiterContext, next: Next): Promise<void> {
  await guardPresentedClient(ctx);
  await next();
}

async function guardPresentedClient(ctx: ArbiterContext): Promise<void> {
  if (ctx.method !== 'POST') return;
  const clientId = presentedClientId(ctx);
  if (clientId) await guardCredential(ctx, clientIdentity(ctx.state.tenant.name, clientId));
}

function presentedClientId(ctx: ArbiterContext): string | undefined {
  const basic = basicCredentials(ctx.get('authorization'));
  if (basic) return basic.id ?? undefined;
  if (formParameter(ctx, 'client_secret')) return formParameter(ctx, 'client_id');
  const assertion = formParameter(ctx, 'client_assertion');
  if (!assertion) return undefined;
  return formParameter(ctx, 'client_id') ?? assertionSubject(assertion);
}

/** RFC 7523 §3: the assertion's `sub` is the client id (read unverified: it only names whom a failure counts against). */
function assertionSubject(assertion: string): string | undefined {
  try {
    const { sub } = decodeJwt(assertion);
    return typeof sub === 'string' ? sub : undefined;
  } catch {
    return undefined;
  }
}

export interface CredentialRequirement {
  /** ISSUER; the realm of the challenges is the request's issuer (the tenant's own at /t/<tenant>). */
  issuer: string;
  /** A client_id alone identifies a public client (`none`), as at /revoke (RFC 7009 §2.1). */
  publicClients: boolean;
  /** An access token is a credential here too (Authorization: Bearer, as at /introspect). */
  bearer: boolean;
  /** Where client certificates come from: a client_id with a certificate is RFC 8705 authentication. */
  mtls?: MtlsSettings;
}

/**
 * RFC 6749 §5.2: a request that presents no client credential at all ("no client authentication
 * included") is 401 invalid_client; oidc-provider would answer 400 invalid_request. RFC 9110
 * §15.5.2 makes a 401 carry a challenge: Basic, and Bearer where an access token is accepted. The
 * failure limiter does not count it (no credential, no guess). Mount after formBody; any
 * Authorization header is left to the endpoint, which refuses a malformed one itself.
 */
export function requireClientCredential(requirement: CredentialRequirement): ArbiterMiddleware {
  return async (ctx, next) => {
    assertCredentialPresented(ctx, requirement);
    await next();
  };
}

/**
 * requireClientCredential and guardClientCredentials as one step (/token): with `formsOnly`, a
 * body that is not a form is left to oidc-provider's 400 instead of being refused as naming no client.
 */
export function clientCredentials(requirement: CredentialRequirement, { formsOnly = false } = {}): ArbiterMiddleware {
  return async function clientCredential(ctx, next) {
    if (!formsOnly || ctx.state.body) assertCredentialPresented(ctx, requirement);
    await guardPresentedClient(ctx);
    await next();
  };
}

function assertCredentialPresented(
  ctx: ArbiterContext,
  { issuer, publicClients, bearer, mtls }: CredentialRequirement,
) {
  if (ctx.method !== 'POST' || presentsCredential(ctx, publicClients || presentsCertificate(mtls, ctx.req))) return;
  const realm = requestIssuer(issuer, ctx.state.tenant);
  ctx.set('WWW-Authenticate', [`Basic realm="${realm}"`, ...(bearer ? [`Bearer realm="${realm}"`] : [])]);
  throw new HttpError(401, 'invalid_client', 'the request presents no client authentication (RFC 6749 §2.3)');
}

/** Whether the request came with a client certificate (RFC 8705 §2: with a client_id, a client authentication). */
function presentsCertificate(mtls: MtlsSettings | undefined, request: ArbiterContext['req']): boolean {
  return mtls !== undefined && mtlsEnabled(mtls) && clientCertificatesOf(mtls).presented(request) !== null;
}

/**
 * The request presents a client credential (RFC 6749 §2.3: Basic, a secret or an assertion in the
 * form), or, when `clientIdCounts`, at least a client_id (a public client's whole authentication).
 */
export function presentsCredential(ctx: ArbiterContext, clientIdCounts: boolean): boolean {
  return Boolean(
    ctx.get('authorization') ||
    formParameter(ctx, 'client_secret') ||
    formParameter(ctx, 'client_assertion') ||
    (clientIdCounts && formParameter(ctx, 'client_id')),
  );
}
