import { activeDelegations, activeDelegationsOn } from '../delegation/index.js';
import {
  refusalOf,
  requestInput,
  type ClientInput,
  type DecisionInput,
  type DecisionOutcome,
  type DelegationGrantInput,
} from '../policy/index.js';
import type { Store } from '../store/index.js';
import type { Evaluation } from './schemas.js';

/** An AuthZEN Decision (§5.5): the boolean, and the policy's output in `context`. */
export interface AuthzenDecision {
  decision: boolean;
  context?: Record<string, unknown>;
}

/** Who asks, for which tenant and when: the same for every evaluation of a request. */
export interface Asker {
  tenant: string;
  client: ClientInput;
  /** One instant for the whole request: a batch's evaluations are decided as of the same time. */
  time: string;
  /** `input.request`, made once: every evaluation of a batch shares this very object. */
  request: DecisionInput['request'];
}

/** The active delegations that concern an evaluation: those to its subject on its resource. */
export type DelegationsOf = (subjectId: string, resourceId: string) => Promise<DelegationGrantInput[]>;

/** One query per distinct subject: a batch asks about few subjects and many resources. */
export function delegationsPerSubject(store: Store, tenant: string): DelegationsOf {
  const cache = new Map<string, Promise<DelegationGrantInput[]>>();
  return async (subjectId, resourceId) => {
    if (!cache.has(subjectId)) cache.set(subjectId, activeDelegations(store, tenant, { sub: subjectId }));
    return (await cache.get(subjectId)!).filter((grant) => grant.resource_id === resourceId);
  };
}

/** One query per distinct subject and resource (a single evaluation, an action search). */
export function delegationsPerPair(store: Store, tenant: string): DelegationsOf {
  const cache = new Map<string, Promise<DelegationGrantInput[]>>();
  return (subjectId, resourceId) => {
    const key = JSON.stringify([subjectId, resourceId]);
    if (!cache.has(key)) cache.set(key, activeDelegations(store, tenant, { sub: subjectId, resourceId }));
    return cache.get(key)!;
  };
}

/** One query for a search over subjects of one resource. */
export function delegationsOnResource(store: Store, tenant: string, resourceId: string): DelegationsOf {
  const all = activeDelegationsOn(store, tenant, resourceId);
  return async (subjectId) =>
    (await all).filter((grant) => grant.grantee_type === 'subject' && grant.grantee_subject_id === subjectId);
}

/** One query for a search over resources of one subject. */
export function delegationsToSubject(store: Store, tenant: string, subjectId: string): DelegationsOf {
  const all = activeDelegations(store, tenant, { sub: subjectId });
  return async (_subjectId, resourceId) => (await all).filter((grant) => grant.resource_id === resourceId);
}

/** `input` of the `access_evaluation` point for one evaluation (docs/policy.md). */
export async function evaluationInput(
  asker: Asker,
  evaluation: Evaluation,
  delegationsOf: DelegationsOf,
): Promise<DecisionInput> {
  return {
    tenant: asker.tenant,
    client: asker.client,
    subject: null,
    delegations: await delegationsOf(evaluation.subject.id, evaluation.resource.id),
    request: asker.request,
    evaluation,
    time: asker.time,
  };
}

/**
 * The outcome as an AuthZEN decision: the policy's obligations and extensions in `context`, and
 * for a deny its error code and text. An engine failure is a closed decision whose context
 * carries the error (for a single evaluation, the router answers 503 instead).
 */
export function authzenDecision(outcome: DecisionOutcome): AuthzenDecision {
  if (outcome.engineError) {
    const { status, error_description: message } = refusalOf(outcome)!;
    return { decision: false, context: { error: { status, message } } };
  }
  const { decision } = outcome;
  const context: Record<string, unknown> = {
    ...(decision.obligations ? { obligations: decision.obligations } : {}),
    ...(decision.extensions ? { extensions: decision.extensions } : {}),
    ...(decision.allow
      ? {}
      : { reason: decision.error_description ?? 'denied by policy', error: decision.error ?? 'access_denied' }),
  };
  return { decision: decision.allow, ...(Object.keys(context).length ? { context } : {}) };
}

/** The request part of every evaluation input of one call. */
export function requestOfEvaluation(endpoint: string): DecisionInput['request'] {
  // The body is in `evaluation`; the parameters stay empty rather than repeat it.
  return requestInput({ endpoint, method: 'POST', parameters: {} });
}
