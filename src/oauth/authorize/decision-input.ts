import type { KoaContextWithOIDC } from 'oidc-provider';
import { requestInput, type DecisionInput } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { clientInput } from '../clients/input.js';
import { oidcParams } from '../shared/oidc-params.js';
import { resolveResources, resourceList } from '../shared/resources.js';
import { decisionScopes } from './claims-request.js';
import { subjectInput } from '../shared/subject-input.js';
import { routes } from '../routes.js';

/**
 * `input` of the `authorize` decision point: the authorization request of a signed-in user.
 * Every resource indicator requested is in `request.resources`, each resolved to its type
 * (RFC 8707 §2: the authorization covers all of them); `request.resource` names the resource
 * only when there is exactly one, as before several were accepted.
 */
export async function authorizeDecisionInput(
  ctx: KoaContextWithOIDC,
  store: Store,
  tenant: string,
  accountId: string,
): Promise<DecisionInput> {
  const params = oidcParams(ctx);
  const requested = [...new Set(resourceList(params.resource))];
  const hint = typeof params.resource_type === 'string' ? params.resource_type : null;
  const resources = await resolveResources(store, tenant, requested, hint);
  const single = resources.length === 1 ? resources[0] : null;
  return {
    tenant,
    client: await clientInput(store, tenant, ctx.oidc.client!.clientId, null),
    subject: await subjectInput(store, tenant, accountId),
    request: requestInput({
      endpoint: routes.authorization,
      method: ctx.method,
      parameters: Object.fromEntries(Object.entries(params).filter(([, value]) => value !== undefined)),
      scopes: decisionScopes(params),
      resource: single?.resource ?? null,
      // Without a resource indicator the hint alone names the type (as at /token); with several, none does.
      resolved_resource_type: single ? single.resolved_resource_type : requested.length === 0 ? hint : null,
      resources,
    }),
    time: new Date().toISOString(),
  };
}
