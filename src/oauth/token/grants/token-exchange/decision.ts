import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { clientRecords } from '../../../../catalog/index.js';
import { delegationsToClientBy } from '../../../../delegation/index.js';
import {
  requestInput,
  type DecisionOutcome,
  type DelegationGrantInput,
  type PointInputs,
} from '../../../../policy/index.js';
import { umaResources } from '../../../../uma/index.js';
import { clientInput } from '../../../clients/input.js';
import { resolveResource, type ResolvedResource } from '../../../shared/resources.js';
import { assertDetailsWithin, type GateDeps } from '../gate.js';
import { enforce } from '../../../shared/enforce.js';
import { rememberDecision } from '../decision.js';
import { ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE, type ExchangeParameters } from './parameters.js';
import type { ResolvedSubject } from './subject.js';
import { definedOnly } from '../token-input.js';
import { oidcParams } from '../../../shared/oidc-params.js';

/**
 * The `token_exchange` decision: the request, the client, the subject the token stands for, the
 * validated subject token and, for delegation, the validated actor token. Remembered (audit, and the hooks that keep obligations with the
 * issued token); a deny is the policy's error. Also the delegations an allowed exchange rests on.
 */
export async function decideExchange(
  ctx: KoaContextWithOIDC,
  deps: GateDeps,
  exchange: ExchangeParameters,
  resolved: ResolvedSubject,
  actor: ResolvedSubject | null,
): Promise<{ outcome: DecisionOutcome; delegations: string[] }> {
  const params = oidcParams(ctx);
  const held = resolved.token.scopes;
  // RFC 8693 §2.1 with the spec: an access token is exchanged for at most what it carries.
  if (resolved.token.token_type === ACCESS_TOKEN_TYPE) {
    const beyond = exchange.scopes.filter((scope) => !held.includes(scope));
    if (beyond.length)
      throw new errors.CustomOIDCProviderError(
        'invalid_grant',
        `requested scope exceeds the subject token's scopes: ${beyond.join(' ').slice(0, 200)}`,
      );
  }
  // At most the authorization details the subject token carries (RFC 9396 §7): never new ones,
  // never larger. An ID token carries none: no user approved any for this client, so the details
  // would be the client's own words (found 2026-11-30: a policy that echoed them minted them).
  if (params.authorization_details !== undefined)
    assertDetailsWithin(
      params.authorization_details,
      resolved.authorizationDetails ?? [],
      resolved.token.token_type === ACCESS_TOKEN_TYPE ? 'the subject token' : 'an ID token subject (it carries none)',
    );
  const { resource, registered } = await exchangeTarget(
    deps,
    params.resource ?? null,
    exchange.audience,
    resolved.token.resource,
  );
  await assertKnownTarget(deps, resource, registered, resolved);
  const resolvedResource = { ...registered, typeUri: registered.typeUri ?? params.resource_type ?? null };
  const client = ctx.oidc.client!;
  const input: PointInputs['token_exchange'] = {
    tenant: deps.tenant,
    client: await clientInput(deps.store, deps.tenant, client.clientId, client.clientAuthMethod),
    subject: resolved.subject,
    // The subject token's user's delegations to this client on resources of the target (the default
    // pack lets a client exchange another client's token of a user only then, or when may_act names it).
    delegations: await delegationsAt(
      deps,
      registered.server,
      await delegationsToClientBy(deps.store, deps.tenant, resolved.token.sub, client.clientId),
    ),
    request: requestInput({
      endpoint: ctx.path,
      method: ctx.method,
      parameters: definedOnly(params),
      grant_type: TOKEN_EXCHANGE,
      // Nothing asked for: an access token asks for what it holds; an ID token holds no scopes.
      scopes: exchange.scopes.length ? exchange.scopes : resolved.token.token_type === ACCESS_TOKEN_TYPE ? held : [],
      resource,
      resolved_resource_type: resolvedResource.typeUri,
    }),
    subject_token: resolved.token,
    actor_token: actor?.token ?? null,
    time: new Date().toISOString(),
  };
  const carried = delegationsCarried(input, resolved, client.clientId);
  const outcome = await deps.policy.decide('token_exchange', input);
  rememberDecision(ctx, outcome);
  enforce.oauth(outcome);
  return { outcome, delegations: [...new Set([...delegationsRestedOn(input, client.clientId), ...carried])] };
}

/**
 * A token this client was issued on its user's delegations, exchanged again: it still stands for
 * what they delegate, so the exchange is for a resource server of the delegated resources (as the
 * first one was), and the token issued rests on those of them that still hold there. Found
 * 2026-11-29: the policy saw the client's own token, and let it be exchanged for any target.
 */
function delegationsCarried(
  input: PointInputs['token_exchange'],
  resolved: ResolvedSubject,
  clientId: string,
): string[] {
  if (!resolved.delegations || resolved.token.client_id !== clientId) return [];
  const carried = (input.delegations ?? [])
    .map((grant) => grant.delegation_id)
    .filter((id) => resolved.delegations!.includes(id));
  if (carried.length === 0)
    throw new errors.CustomOIDCProviderError(
      'invalid_target',
      'the subject token was issued on a delegation: it is exchanged only for the resource server of the delegated resources, while a delegation lasts',
    );
  return carried;
}

/**
 * Of these delegations, those on UMA resources that `target`, the resource server the exchange is
 * for, serves: registered by the client the resource server record names. A delegation gives
 * access to a resource at its resource server, not its scope names at any other: found
 * 2026-11-29, a user's delegation of `read` on a photo let the grantee exchange her bank token for
 * a bank token with `read`. None for a target that names no client (or no target).
 */
async function delegationsAt(
  deps: GateDeps,
  target: ResolvedResource['server'],
  grants: DelegationGrantInput[],
): Promise<DelegationGrantInput[]> {
  if (grants.length === 0 || target?.clientId == null) return [];
  const server = await clientRecords(deps.store, deps.tenant).get(target.clientId);
  if (!server) return [];
  const resources = await umaResources(deps.store, deps.tenant).getMany([
    ...new Set(grants.map((grant) => grant.resource_id)),
  ]);
  const served = new Set(resources.filter((each) => each.ownerClientId === server.clientId).map((each) => each.id));
  return grants.filter((grant) => served.has(grant.resource_id));
}

/**
 * The delegations an allowed exchange rests on: another client's access token of a user, whose
 * `may_act` does not name this client, is exchangeable only because that user delegated to this
 * client (the default pack's `subject_token_exchangeable`). The token issued then lasts while
 * one of them is active, as a requesting party token's delegated permission does. Counted
 * generously: a policy that allowed the exchange for another reason only ties it to them.
 */
function delegationsRestedOn(input: PointInputs['token_exchange'], clientId: string): string[] {
  const token = input.subject_token;
  if (token.token_type !== ACCESS_TOKEN_TYPE || token.client_id === clientId || token.sub === null) return [];
  if ((token.may_act as { client_id?: unknown } | null | undefined)?.client_id === clientId) return [];
  return (input.delegations ?? [])
    .filter((grant) => grant.grantee_client_id === clientId && grant.owner.sub === token.sub)
    .map((grant) => grant.delegation_id);
}

/**
 * RFC 8693 §2.1: `resource` and `audience` both name where the token will be used, and an
 * issued token has one audience (its resource). An audience alone is taken as the resource (it
 * must then be one this server knows, as a resource must); with a resource, the audience must
 * name the same target: the resource itself or its resource type. Anything else is a target
 * the token cannot serve: invalid_target (§2.2.2), never a token that ignores the audience.
 * Neither named: the subject token's own resource (`kept`), so that an exchange never turns a
 * token for one resource server into one without an audience, which every one of them may read.
 */
async function exchangeTarget(
  deps: GateDeps,
  resource: string | null,
  audience: string | null,
  kept: string | null,
): Promise<{ resource: string | null; registered: ResolvedResource }> {
  const target = resource ?? audience ?? kept;
  const registered = await resolveResource(deps.store, deps.tenant, target, null);
  const sameTarget = (name: string) =>
    name === resource || name === registered.typeUri || Boolean(registered.server?.typeUris?.includes(name));
  if (resource !== null && audience !== null && !sameTarget(audience)) {
    throw new errors.InvalidTarget(
      `the audience ${audience.slice(0, 200)} is not the requested resource: a token is issued for one target`,
    );
  }
  return { resource: target, registered };
}

/**
 * RFC 8707 §2, RFC 8693 §2.2.2: the token asked for is for the subject token's own resource, a
 * resource registered at this server (a resource server or a UMA resource), or a resource type
 * policy data defines; any other resource is invalid_target. An exchange must not mint tokens
 * for audiences nobody registered (the policy would only see an unresolved resource).
 */
async function assertKnownTarget(
  deps: GateDeps,
  resource: string | null,
  registered: ResolvedResource,
  subject: ResolvedSubject,
): Promise<void> {
  if (resource === null || resource === subject.token.resource || registered.server || registered.typeUri) return;
  const types = ((await deps.policy.policyData('oauth')) as { resource_types?: unknown } | undefined)?.resource_types;
  if (types && typeof types === 'object' && Object.hasOwn(types, resource)) return;
  throw new errors.InvalidTarget(`the resource is not registered at this server: ${resource.slice(0, 200)}`);
}
