import type Router from '@koa/router';
import { recordDecision } from '../audit/index.js';
import { readJsonBody } from '../http/body.js';
import { HttpError } from '../http/errors.js';
import { assertValid } from '../http/validation.js';
import { httpRefusal, requestInput, type DenyRules } from '../policy/index.js';
import { decidePermissions, grantedScopes, type PermissionAnswer } from './decide.js';
import type { ResourceOwner } from './resources.js';
import type { ApiContext, ApiState, UmaDeps } from './deps.js';
import { PERMISSION_REQUEST } from './schemas.js';
import { issueTicket, type RequestedPermission } from './tickets.js';

export const PERMISSION_PATH = '/permission';

/**
 * UMA 2.0 Federated Authorization §4: a resource server asks for a permission ticket on its
 * owner's resources (one permission, or an array of them). Each permission is put to the
 * `uma_permission` decision (operation `ticket`); any refusal refuses the ticket.
 */
export function permissionRoutes(
  router: Router<ApiState>,
  deps: UmaDeps,
  ownerOf: (ctx: ApiContext) => Promise<ResourceOwner>,
): void {
  router.post(PERMISSION_PATH, async (ctx) => {
    const owner = await ownerOf(ctx);
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<RequestedPermission | RequestedPermission[]>(PERMISSION_REQUEST, body);
    const permissions = Array.isArray(body) ? body : [body];
    const tenant = ctx.state.tenant.name;
    const answers = await decidePermissions(
      deps.store,
      deps.policy,
      {
        operation: 'ticket',
        tenant,
        registeredBy: owner,
        client: await deps.parties.client(tenant, owner.clientId, 'bearer'),
        subject: owner.sub ? await deps.parties.subject(tenant, owner.sub) : null,
        request: requestInput({
          endpoint: PERMISSION_PATH,
          method: 'POST',
          parameters: Array.isArray(body) ? { permissions: body } : { ...body },
        }),
      },
      permissions,
    );
    recordDecision(ctx.state, ...answers.map((answer) => answer.outcome));
    const refused = answers.find((answer) => grantedScopes(answer).length === 0);
    if (refused) throw permissionDenial(refused);
    const granted = answers.map((answer) => ({
      resource_id: answer.permission.resource_id,
      resource_scopes: grantedScopes(answer),
    }));
    ctx.status = 201;
    ctx.body = { ticket: await issueTicket(deps.store, tenant, owner, granted, deps.ticketSeconds) };
  });
}

/** UMA's error codes as the policy gives them (invalid_resource_id, invalid_scope: 400; access_denied, request_denied: 403). */
const UMA_DENIALS: DenyRules = {
  defaultError: 'request_denied',
  statusOf: (code) => (code === 'access_denied' || code === 'request_denied' ? 403 : 400),
};

/** The refusal of a permission the policy denied (an engine failure: 503), or allowed with none of the requested scopes. */
function permissionDenial({ outcome }: PermissionAnswer): HttpError {
  return (
    httpRefusal(outcome, UMA_DENIALS) ??
    new HttpError(400, 'invalid_scope', 'the policy grants none of the requested scopes')
  );
}
