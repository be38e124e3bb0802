import { subjectRecords } from '../../catalog/index.js';
import type { Decision } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { permissionsInForce } from '../token/grants/uma-ticket/permissions.js';
import { carriedDetails } from '../shared/rar.js';
import type { TokenModel } from '../state.js';
import { resourceOf } from './decide.js';

export const INACTIVE = { active: false } as const;

/**
 * The spec's introspection response for an active token the policy allows: the token's own
 * facts (its scopes narrowed by the decision, never widened; its authorization details as
 * issued) plus what the policy outputs now (obligations, extensions).
 */
export async function introspectionBody(
  store: Store,
  tenant: string,
  issuer: string,
  token: TokenModel,
  decision: Decision,
  resourceTypes: string[],
): Promise<Record<string, unknown>> {
  const extra = (token.extra ?? {}) as Record<string, unknown>;
  const body: Record<string, unknown> = {
    active: true,
    scope: shownScopes(token.scope, decision.scopes) || undefined,
    client_id: token.clientId,
    sub: token.accountId,
    username: token.accountId ? await usernameOf(store, tenant, token.accountId) : undefined,
    // RFC 9449 §6.2: a DPoP-bound token's type is DPoP (the RS then requires the proof).
    token_type: token.jkt ? 'DPoP' : 'Bearer',
    exp: token.exp,
    iat: token.iat,
    iss: issuer,
    // RFC 7662 §2.2: the audience a resource-bound token was issued for (RFC 8707 §2); `resource` is kept for existing callers.
    aud: audienceOf(token),
    resource: resourceOf(token) ?? undefined,
    resource_types: resourceTypes.length ? resourceTypes : undefined,
    authorization_details: nonEmpty(carriedDetails(token)),
    obligations: decision.obligations ?? extra.obligations,
    extensions: decision.extensions ?? extra.extensions,
    cnf: confirmationOf(token),
    act: extra.act,
    // A requesting party token (UMA 2.0 Grant §3.3.5): its permissions still in force.
    permissions: nonEmpty(permissionsInForce(token as { extra?: unknown; exp?: unknown })),
  };
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined && value !== null));
}

/** RFC 7800 §3.1 `cnf`: the DPoP key (RFC 9449 §6.2) or the client certificate (RFC 8705 §3.2) a token is bound to. */
function confirmationOf(token: TokenModel): Record<string, string> | undefined {
  if (token.jkt) return { jkt: token.jkt };
  const certificate = token['x5t#S256'];
  return typeof certificate === 'string' ? { 'x5t#S256': certificate } : undefined;
}

/** A token the policy marks single-use (now or at issuance) is deleted after its first successful introspection. */
export function isSingleUse(token: TokenModel, decision: Decision): boolean {
  return (
    decision.jit_single_use === true || (token.extra as Record<string, unknown> | undefined)?.jit_single_use === true
  );
}

/** The token's audience as issued: one resource server (a string) or several (an array); none for a token without one. */
function audienceOf(token: TokenModel): string | string[] | undefined {
  const { aud } = token;
  if (typeof aud === 'string' && aud) return aud;
  return Array.isArray(aud) && aud.length ? (aud as string[]) : undefined;
}

async function usernameOf(store: Store, tenant: string, sub: string): Promise<string | undefined> {
  const subject = await subjectRecords(store, tenant).findOne({ subjectId: sub });
  return subject?.preferredUsername ?? undefined;
}

/** The token's scopes, narrowed to those the introspect decision names when it names any. */
function shownScopes(issued: string | undefined, decided: string[] | undefined): string {
  const scopes = (issued ?? '').split(' ').filter(Boolean);
  return (decided ? scopes.filter((scope) => decided.includes(scope)) : scopes).join(' ');
}

function nonEmpty(value: unknown): unknown {
  return Array.isArray(value) && value.length ? value : undefined;
}
