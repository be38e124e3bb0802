import type { KoaContextWithOIDC } from 'oidc-provider';
import { requestInput, type DecisionInput } from '../../policy/index.js';
import type { Store } from '../../store/index.js';
import { clientInput } from '../clients/input.js';
import { resolveResource } from '../shared/resources.js';
import { decisionScopes } from './claims-request.js';
import { subjectInput } from '../shared/subject-input.js';
import { routes } from '../routes.js';

/** `input` of the `authorize` decision point: the authorization request of a signed-in user. */
export async function authorizeDecisionInput(
  ctx: KoaContextWithOIDC,
  store: Store,
  tenant: string,
  accountId: string,
): Promise<DecisionInput> {
  const params = ctx.oidc.params as Record<string, string | undefined>;
  const resource = params.resource ?? null;
  const resolved = await resolveResource(store, tenant, resource, params.resource_type ?? null);
  return {
    tenant,
    client: await clientInput(store, tenant, ctx.oidc.client!.clientId, null),
    subject: await subjectInput(store, tenant, accountId),
    request: requestInput({
      endpoint: routes.authorization,
      method: ctx.method,
      parameters: Object.fromEntries(Object.entries(params).filter(([, value]) => value !== undefined)),
      scopes: decisionScopes(params),
      resource,
      resolved_resource_type: resolved.typeUri,
    }),
    time: new Date().toISOString(),
  };
}
