import type Provider from 'oidc-provider';
import { errors } from 'oidc-provider';
import type { Store } from '../../../../store/index.js';
import { activeAccessToken } from '../../../shared/callers.js';
import { carriedDetails } from '../../../shared/rar.js';
import { subjectInput } from '../../../shared/subject-input.js';
import { bindingOf } from '../sender-binding.js';
import { ACCESS_TOKEN_TYPE } from './parameters.js';
import { artefactKey } from '../../../../../adapters/oidc/index.js';
import { DELEGATION_IDS, EXCHANGED_FROM, SUBJECT_ISSUER } from '../../../state.js';
import type { ResolvedSubject } from './subject.js';

const notActive = (role: string) =>
  new errors.CustomOIDCProviderError(
    'invalid_grant',
    `the ${role} token is not an active access token issued by this server`,
  );

/**
 * An access token this server issued (RFC 8693 §2.1, spec: "issued by the service, active and
 * unexpired"), looked up in this tenant's provider (each tenant has its own store, so another
 * tenant's token is unknown here). It is read, never consumed: the subject token stays valid.
 */
export async function resolveAccessToken(
  provider: Provider,
  store: Store,
  tenant: string,
  value: string,
  role: 'subject' | 'actor' | 'claim' = 'subject',
): Promise<ResolvedSubject> {
  const token = await activeAccessToken(provider, value);
  if (!token) throw notActive(role);
  const exchangedFrom = exchangedFromOf(token.extra);
  if (exchangedFrom.length >= MAX_EXCHANGES)
    throw new errors.CustomOIDCProviderError(
      'invalid_grant',
      `the ${role} token was exchanged from ${exchangedFrom.length} tokens in turn, the most a token may be`,
    );
  const accountId = typeof token.accountId === 'string' ? token.accountId : null;
  const aud = Array.isArray(token.aud) ? token.aud[0] : token.aud;
  const binding = bindingOf(token);
  const delegations = delegationIdsOf(token.extra);
  return {
    token: {
      token_type: ACCESS_TOKEN_TYPE,
      active: true,
      iss: provider.issuer,
      sub: accountId,
      client_id: typeof token.clientId === 'string' ? token.clientId : null,
      scopes: typeof token.scope === 'string' ? token.scope.split(' ').filter(Boolean) : [],
      resource: typeof aud === 'string' ? aud : null,
      exp: typeof token.exp === 'number' ? token.exp : null,
      act: actOf(token.extra),
      cnf_jkt: binding.jkt,
      cnf_x5t_s256: binding.x5t,
    },
    subject: accountId ? await subjectInput(store, tenant, accountId) : null,
    binding,
    authorizationDetails: carriedDetails(token),
    restsOn: [...exchangedFrom, artefactKey(token.kind, token.jti)],
    ...(typeof token.extra?.[SUBJECT_ISSUER] === 'string' ? { subjectIssuer: token.extra[SUBJECT_ISSUER] } : {}),
    ...(delegations.length ? { delegations } : {}),
  };
}

/** How long a chain of exchanges may grow: each use of its last token reads every token of it. */
const MAX_EXCHANGES = 8;

/** The tokens an exchanged token was exchanged from, in turn (EXCHANGED_FROM); none for any other token. */
export function exchangedFromOf(extra: unknown): string[] {
  return idsAt(extra, EXCHANGED_FROM);
}

/** The delegations an exchanged token rests on (DELEGATION_IDS); none for any other token. */
export function delegationIdsOf(extra: unknown): string[] {
  return idsAt(extra, DELEGATION_IDS);
}

/** The ids a token's `extra` keeps under `member`, server-side. */
function idsAt(extra: unknown, member: string): string[] {
  const ids = (extra as Record<string, unknown> | undefined)?.[member];
  return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [];
}

/** The `act` claim an exchanged token keeps with it (see issue.ts), for chains of actors. */
function actOf(extra: unknown): Record<string, unknown> | null {
  const act = (extra as { act?: unknown } | undefined)?.act;
  return typeof act === 'object' && act !== null && !Array.isArray(act) ? (act as Record<string, unknown>) : null;
}
