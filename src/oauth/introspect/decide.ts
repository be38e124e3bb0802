import type { ArbiterContext, TokenModel } from '../state.js';
import type Provider from 'oidc-provider';
import type {
  DecisionInput,
  DecisionOutcome,
  IntrospectedTokenInput,
  IntrospectionCallerInput,
  PolicyEngine,
} from '../../policy/index.js';
import { delegationsToClientBy } from '../../delegation/index.js';
import { requestInput } from '../../policy/index.js';
import { DEFAULT_TENANT, type Store } from '../../store/index.js';
import { issuersOfTenant, tenantOf } from '../../tenancy/index.js';
import { clientInput } from '../clients/input.js';
import { findClientRecord } from '../clients/records.js';
import { formParameter } from '../shared/form-body.js';
import { rememberDecision } from '../token/grants/decision.js';
import { carriedDetails } from '../shared/rar.js';
import { resolveResource, resourceServersOfClient } from '../shared/resources.js';
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
  /** ISSUER: the tenant's issuers are it and ISSUER/t/<tenant>. */
  issuer: string;
}

/** Asks the `introspect` decision point about one token for one caller; asked on every call, never cached. */
export async function decideIntrospection(
  ctx: ArbiterContext,
  deps: IntrospectionDeps,
  tenant: string,
  token: TokenModel,
  caller: Caller,
): Promise<DecisionOutcome> {
  const input = await introspectionInput(deps, tenant, token, {
    client: await clientInput(deps.store, tenant, caller.clientId, caller.method),
    caller: await callerInput(deps.store, tenant, caller),
    tokenTypeHint: formParameter(ctx, 'token_type_hint') ?? null,
    context: parseContext(ctx),
  });
  const outcome = await deps.policy.decide('introspect', input);
  rememberDecision(ctx as never, outcome);
  return outcome;
}

/** Who asks about a token, as the `introspect` input names them, and what they sent with it. */
interface IntrospectionAsker {
  client: Awaited<ReturnType<typeof clientInput>>;
  caller: IntrospectionCallerInput;
  tokenTypeHint: string | null;
  context: Record<string, unknown>;
}

/** The `introspect` input about one token for one asker (the one shape the live path and events from policy decide). */
async function introspectionInput(
  deps: Pick<IntrospectionDeps, 'store' | 'issuer'>,
  tenant: string,
  token: TokenModel,
  asker: IntrospectionAsker,
): Promise<DecisionInput> {
  const resource = resourceOf(token);
  const resolved = await resolveResource(deps.store, tenant, resource, null);
  return {
    tenant,
    client: asker.client,
    subject: token.accountId ? await subjectInput(deps.store, tenant, token.accountId) : null,
    delegations: token.clientId ? await delegationsToClientBy(deps.store, tenant, token.accountId, token.clientId) : [],
    request: requestInput({
      endpoint: routes.introspection,
      parameters: { token_type_hint: asker.tokenTypeHint, context: asker.context },
      scopes: [],
      resource,
      resolved_resource_type: resolved.typeUri,
      resource_types: resolved.typeUri ? [resolved.typeUri] : [],
      authorization_details: carriedDetails(token) as never,
    }),
    token: tokenInput(
      token,
      resolved.typeUri,
      issuersOfTenant(deps.issuer, tenantOf(tenant === DEFAULT_TENANT ? null : tenant)),
    ),
    caller: asker.caller,
    context: asker.context,
    time: new Date().toISOString(),
  } as DecisionInput;
}

/**
 * The `introspect` input of an access token nobody has introspected yet (events from policy,
 * src/signals): as if the resource servers it was issued for asked about it, entitled to
 * (`introspection` scope, their resource indicators its audiences), under its own client's
 * name; no caller context. Built from the token as stored: what was issued.
 */
export async function introspectionAsIssued(
  deps: Pick<IntrospectionDeps, 'store' | 'issuer'>,
  tenant: string,
  stored: Record<string, unknown>,
): Promise<DecisionInput> {
  const token = { ...stored, isValid: true } as TokenModel;
  const method = 'client_secret_basic';
  const audiences = audiencesOf(
    token,
    issuersOfTenant(deps.issuer, tenantOf(tenant === DEFAULT_TENANT ? null : tenant)),
  );
  return introspectionInput(deps, tenant, token, {
    client: await clientInput(deps.store, tenant, String(token.clientId), method),
    caller: { method, scopes: ['introspection'], resource_server: null, resource_indicators: audiences },
    tokenTypeHint: null,
    context: {},
  });
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

/**
 * Every resource the token was issued for (its `aud`, RFC 8707), for the policy to match against
 * the caller's (RFC 7662 §4). This server's own issuer is no resource server: oidc-provider binds
 * a token with authorization details and no resource to it (shared/rar.ts), a token meant for
 * none in particular, as one without any audience is.
 */
function audiencesOf(token: TokenModel, issuers: string[]): string[] {
  return [token.aud ?? token.resource]
    .flat()
    .filter((aud): aud is string => typeof aud === 'string' && aud !== '' && !issuers.includes(aud));
}

function tokenInput(token: TokenModel, typeUri: string | null, issuers: string[]): IntrospectedTokenInput {
  return {
    active: token.isValid,
    token_type: token.kind === 'RefreshToken' ? 'refresh_token' : 'access_token',
    client_id: token.clientId ?? null,
    sub: token.accountId ?? null,
    scopes: typeof token.scope === 'string' ? token.scope.split(' ').filter(Boolean) : [],
    resource: resourceOf(token),
    audiences: audiencesOf(token, issuers),
    resource_types: typeUri ? [typeUri] : [],
    authorization_details: carriedDetails(token),
    exp: token.exp ?? null,
    iat: token.iat ?? null,
    cnf_jkt: token.jkt ?? null,
    cnf_x5t_s256: typeof token['x5t#S256'] === 'string' ? token['x5t#S256'] : null,
  };
}

/** The caller and the resource servers it introspects for: the policy shows a resource server only tokens meant for it. */
async function callerInput(store: Store, tenant: string, caller: Caller): Promise<IntrospectionCallerInput> {
  const client = await findClientRecord(store, tenant, caller.clientId);
  const servers = client ? await resourceServersOfClient(store, tenant, client.id) : [];
  const [server] = servers;
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
    resource_indicators: servers.map((each) => each.resourceIndicator),
  };
}

export type { Provider };
