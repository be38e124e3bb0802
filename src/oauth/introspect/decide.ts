import type { ArbiterContext, TokenModel } from '../state.js';
import type Provider from 'oidc-provider';
import type {
  DecisionOutcome,
  IntrospectedTokenInput,
  IntrospectionCallerInput,
  PolicyEngine,
} from '../../policy/index.js';
import { activeDelegations } from '../../delegation/index.js';
import { requestInput } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { clientInput } from '../clients/input.js';
import { findClientRecord } from '../clients/records.js';
import { formParameter } from '../shared/form-body.js';
import { rememberDecision } from '../token/grants/decision.js';
import { resolveResource, resourceServerOfClient } from '../shared/resources.js';
import { subjectInput } from '../shared/subject-input.js';
import { routes } from '../routes.js';

export interface Caller {
  /** The client the caller authenticated as (the client of its bearer token for Bearer callers). */
  clientId: string;
  method: string;
  scopes: string[];
}

export interface IntrospectionDeps {
  store: Store;
  policy: PolicyEngine;
}

/** Asks the `introspect` decision point about one token for one caller; asked on every call, never cached. */
export async function decideIntrospection(
  ctx: ArbiterContext,
  deps: IntrospectionDeps,
  tenant: string,
  token: TokenModel,
  caller: Caller,
): Promise<DecisionOutcome> {
  const resource = resourceOf(token);
  const resolved = await resolveResource(deps.store, tenant, resource, null);
  const context = parseContext(ctx);
  const outcome = await deps.policy.decide('introspect', {
    tenant,
    client: await clientInput(deps.store, tenant, caller.clientId, caller.method),
    subject: token.accountId ? await subjectInput(deps.store, tenant, token.accountId) : null,
    delegations: await activeDelegations(deps.store, tenant, {
      sub: token.accountId ?? null,
      clientId: token.clientId ?? null,
    }),
    request: requestInput({
      endpoint: routes.introspection,
      parameters: { token_type_hint: formParameter(ctx, 'token_type_hint') ?? null, context },
      scopes: [],
      resource,
      resolved_resource_type: resolved.typeUri,
      resource_types: resolved.typeUri ? [resolved.typeUri] : [],
      authorization_details: (token.extra?.authorization_details ?? token.rar ?? []) as never,
    }),
    token: tokenInput(token, resolved.typeUri),
    caller: await callerInput(deps.store, tenant, caller),
    context,
    time: new Date().toISOString(),
  });
  rememberDecision(ctx as never, outcome);
  return outcome;
}

/** The `context` parameter: a JSON object supplied by the resource server (checked by introspectionGuard). */
export function parseContext(ctx: ArbiterContext): Record<string, unknown> {
  const raw = formParameter(ctx, 'context');
  return raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
}

export function resourceOf(token: TokenModel): string | null {
  const aud = token.aud ?? token.resource;
  if (Array.isArray(aud)) return aud[0] ?? null;
  return typeof aud === 'string' ? aud : null;
}

function tokenInput(token: TokenModel, typeUri: string | null): IntrospectedTokenInput {
  return {
    active: token.isValid,
    token_type: token.kind === 'RefreshToken' ? 'refresh_token' : 'access_token',
    client_id: token.clientId ?? null,
    sub: token.accountId ?? null,
    scopes: typeof token.scope === 'string' ? token.scope.split(' ').filter(Boolean) : [],
    resource: resourceOf(token),
    resource_types: typeUri ? [typeUri] : [],
    authorization_details: (token.extra?.authorization_details ?? token.rar ?? []) as unknown[],
    exp: token.exp ?? null,
    iat: token.iat ?? null,
    cnf_jkt: token.jkt ?? null,
  };
}

async function callerInput(store: Store, tenant: string, caller: Caller): Promise<IntrospectionCallerInput> {
  const client = await findClientRecord(store, tenant, caller.clientId);
  const server = client ? await resourceServerOfClient(store, tenant, client.id) : null;
  return {
    method: caller.method,
    scopes: caller.scopes,
    resource_server: server
      ? {
          resource_indicator: server.resourceIndicator,
          type_uris: server.typeUris ?? [],
          capability: server.capability ?? {},
        }
      : null,
  };
}

export type { Provider };
