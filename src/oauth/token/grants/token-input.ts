import type { KoaContextWithOIDC } from 'oidc-provider';
import { delegationsToClientBy } from '../../../delegation/index.js';
import { requestInput, type DecisionInput } from '../../../policy/index.js';
import type { Store } from '../../../store/index.js';
import { claimsNamed, scopesCarrying } from '../../claims.js';
import { clientInput } from '../../clients/input.js';
import { resolveResource } from '../../shared/resources.js';
import { subjectInput } from '../../shared/subject-input.js';
import { oidcParams } from '../../shared/oidc-params.js';

/** RFC 8628 §3.4: the device code grant. */
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** The code or refresh token a grant is redeemed from: what was granted before. */
export interface GrantSource {
  accountId?: string;
  scope?: string;
  rar?: unknown[];
  resource?: string | string[];
  grantId?: string;
  /** The client it was issued to. */
  clientId?: string;
  /** The `claims` request of the authorization (OIDC Core §5.5), as the code or refresh token keeps it. */
  claims?: unknown;
}

/**
 * How a grant finds what it redeems when gate.ts's code or refresh token lookup does not fit: it
 * answers the grant source, or throws the grant's own error before the policy is asked (a device
 * code still waiting for its user: device/polling.ts).
 */
export type SourceLookup = (ctx: KoaContextWithOIDC) => Promise<GrantSource>;

/** `input` of the `token` decision point for a request at /token. */
export async function tokenDecisionInput(
  ctx: KoaContextWithOIDC,
  store: Store,
  tenant: string,
  source: GrantSource | undefined,
): Promise<DecisionInput> {
  const params = oidcParams(ctx);
  const resource = params.resource ?? firstResource(source?.resource) ?? null;
  const resolved = await resolveResource(store, tenant, resource, params.resource_type ?? null);
  const client = ctx.oidc.client!;
  const requested = [...new Set([...scopesAsked(params, source), ...claimScopesOf(source)])];
  return {
    tenant,
    client: await clientInput(store, tenant, client.clientId, client.clientAuthMethod),
    subject: source?.accountId ? await subjectInput(store, tenant, source.accountId) : null,
    delegations: await delegationsToClientBy(store, tenant, source?.accountId, client.clientId),
    request: requestInput({
      endpoint: ctx.path,
      method: ctx.method,
      parameters: definedOnly(params),
      scopes: requested,
      resource,
      resolved_resource_type: resolved.typeUri,
      ...(source?.rar && !params.authorization_details ? { authorization_details: source.rar as never } : {}),
    }),
    time: new Date().toISOString(),
  };
}

/**
 * What the request asks for: a refresh or client_credentials request may name scopes (a refresh
 * only fewer than it holds); a code exchange has no scope parameter of its own (RFC 6749 §4.1.3),
 * nor does a device code's (RFC 8628 §3.4), so it asks for exactly what the code carries,
 * whatever the request says.
 */
export function scopesAsked(
  params: Readonly<Record<string, string | undefined>>,
  source: GrantSource | undefined,
): string[] {
  const carried = source?.scope?.split(' ').filter(Boolean) ?? [];
  if (params.grant_type === 'authorization_code' || params.grant_type === DEVICE_CODE_GRANT) return carried;
  return params.scope ? params.scope.split(' ').filter(Boolean) : carried;
}

/**
 * The scopes carrying a claim the authorization's `claims` request names: asked for again at every
 * redemption, as at /authorize (authorize/claims-request.ts), so that the policy decides on the
 * claims each time; the token issued releases them only under those it grants (gate.ts, CLAIM_SCOPES).
 */
export function claimScopesOf(source: GrantSource | undefined): string[] {
  return [...new Set(claimsNamed(source?.claims).flatMap(scopesCarrying))];
}

function firstResource(resource: string | string[] | undefined): string | undefined {
  return Array.isArray(resource) ? resource[0] : resource;
}

/** The grant's form parameters that were given (oidc-provider lists the absent ones as undefined). */
export function definedOnly(params: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).filter(([, value]) => value !== undefined));
}
