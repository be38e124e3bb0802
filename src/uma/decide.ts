import type {
  ClientInput,
  DecisionOutcome,
  DelegationGrantInput,
  PolicyEngine,
  RequestInput,
  SubjectInput,
} from '../policy/index.js';
import type { Store } from '../store/index.js';
import { findResource, ownedResource, resourceInput, type ResourceOwner } from './resources.js';
import type { RequestedPermission } from './tickets.js';

/** Who asks about UMA permissions, and at which step (docs/policy.md, uma_permission). */
export interface PermissionQuestion {
  operation: 'ticket' | 'rpt';
  tenant: string;
  client: ClientInput | null;
  subject: SubjectInput | null;
  request: RequestInput;
  /** At `rpt`: the active delegations to the requesting party or client on one resource. */
  delegations?: (resourceId: string) => Promise<DelegationGrantInput[]>;
  /**
   * At `ticket`: the resource server (the PAT's owner) asking. It names only the resources it
   * registered: another's, even of the same user, is unknown to it (no resource in the input), as
   * its resource registration endpoint answers 404 for it (UMA 2.0 Federated Authorization §4.3).
   */
  registeredBy?: ResourceOwner;
}

export interface PermissionAnswer {
  permission: RequestedPermission;
  outcome: DecisionOutcome;
}

/**
 * One `uma_permission` decision per permission (each names one resource, its owner included),
 * asked concurrently. What is granted is the decision's scopes within those asked for.
 */
export async function decidePermissions(
  store: Store,
  policy: PolicyEngine,
  question: PermissionQuestion,
  permissions: RequestedPermission[],
): Promise<PermissionAnswer[]> {
  return Promise.all(
    permissions.map(async (permission) => {
      const [resource, delegations] = await Promise.all([
        question.registeredBy
          ? ownedResource(store, question.tenant, question.registeredBy, permission.resource_id)
          : findResource(store, question.tenant, permission.resource_id),
        question.delegations?.(permission.resource_id),
      ]);
      const outcome = await policy.decide('uma_permission', {
        tenant: question.tenant,
        client: question.client,
        subject: question.subject,
        ...(delegations ? { delegations } : {}),
        request: question.request,
        permission: {
          operation: question.operation,
          resource_id: permission.resource_id,
          resource_scopes: permission.resource_scopes,
          resource: resourceInput(resource),
        },
        time: new Date().toISOString(),
      });
      return { permission, outcome };
    }),
  );
}

/** The scopes an allowing decision grants: never beyond those asked for. */
export function grantedScopes(answer: PermissionAnswer): string[] {
  const { decision, engineError } = answer.outcome;
  if (!decision.allow || engineError) return [];
  return (decision.scopes ?? []).filter((scope) => answer.permission.resource_scopes.includes(scope));
}
