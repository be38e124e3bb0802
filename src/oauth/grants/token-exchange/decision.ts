import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { requestInput, type DecisionOutcome, type PointInputs } from '../../../policy/index.js';
import { clientInput } from '../../client-input.js';
import { resolveResource } from '../../resources.js';
import type { GateDeps } from '../gate.js';
import { denial, rememberDecision } from '../decision.js';
import { ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE, type ExchangeParameters } from './parameters.js';
import type { ResolvedSubject } from './subject.js';
import { definedOnly } from '../token-input.js';

/**
 * The `token_exchange` decision: the request, the client, the subject the token stands for, the
 * validated subject token and, for delegation, the validated actor token. Remembered (audit, and the hooks that keep obligations with the
 * issued token); a deny is the policy's error.
 */
export async function decideExchange(ctx: KoaContextWithOIDC, deps: GateDeps, exchange: ExchangeParameters, resolved: ResolvedSubject, actor: ResolvedSubject | null): Promise<DecisionOutcome> {
  const params = ctx.oidc.params as Record<string, string | undefined>;
  const held = resolved.token.scopes;
  // RFC 8693 §2.1 with the spec: an access token is exchanged for at most what it carries.
  if (resolved.token.token_type === ACCESS_TOKEN_TYPE) {
    const beyond = exchange.scopes.filter((scope) => !held.includes(scope));
    if (beyond.length) throw new errors.CustomOIDCProviderError('invalid_grant', `requested scope exceeds the subject token's scopes: ${beyond.join(' ').slice(0, 200)}`);
  }
  const resource = params.resource ?? null;
  const resolvedResource = await resolveResource(deps.store, deps.tenant, resource, params.resource_type ?? null);
  const client = ctx.oidc.client!;
  const input: PointInputs['token_exchange'] = {
    tenant: deps.tenant,
    client: await clientInput(deps.store, deps.tenant, client.clientId, client.clientAuthMethod),
    subject: resolved.subject,
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
  const outcome = await deps.policy.decide('token_exchange', input);
  rememberDecision(ctx, outcome);
  if (!outcome.decision.allow) throw denial(outcome);
  return outcome;
}
