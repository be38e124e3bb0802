import { activeDelegations, activeDelegationsOn, delegationsToSubjectUpTo } from '../delegation/index.js';
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

/**
 * One query per distinct subject and resource, by both (an evaluation, a batch, an action or a
 * resource search): not every delegation to the subject, which are as many as anyone made
 * (found 2026-11-29: a batch about a user with 100 of the largest delegations to her kept 2.8 MB).
 */
export function delegationsPerPair(store: Store, tenant: string): DelegationsOf {
  const cache = new Map<string, Promise<DelegationGrantInput[]>>();
  return (subjectId, resourceId) => {
    const key = JSON.stringify([subjectId, resourceId]);
    if (!cache.has(key)) cache.set(key, activeDelegations(store, tenant, { sub: subjectId, resourceId }));
    return cache.get(key)!;
  };
}

/** A resource search reads the subject's delegations at once up to this many; past it, per candidate. */
const SUBJECT_READ_MAX = 500;

/**
 * A search over resources of one subject: one query for all the subject's delegations while they
 * are few (a query per candidate cost a search of 5,000 candidates 256 ms against 11), else one
 * per candidate, by subject and resource, however many others delegated to the subject.
 */
export function delegationsForResourceSearch(store: Store, tenant: string, subjectId: string): DelegationsOf {
  const few = once(() => delegationsToSubjectUpTo(store, tenant, subjectId, SUBJECT_READ_MAX));
  const perPair = delegationsPerPair(store, tenant);
  return async (subject, resourceId) => {
    const all = await few();
    return all ? all.filter((grant) => grant.resource_id === resourceId) : perPair(subject, resourceId);
  };
}

/** One query for a search over subjects of one resource. */
export function delegationsOnResource(store: Store, tenant: string, resourceId: string): DelegationsOf {
  const all = once(() => activeDelegationsOn(store, tenant, resourceId));
  return async (subjectId) =>
    (await all()).filter((grant) => grant.grantee_type === 'subject' && grant.grantee_subject_id === subjectId);
}

/**
 * A read made at the first call, shared by the next: not before, so that a search with no
 * candidate makes none, and none fails unawaited (found 2026-11-29: a store fault then was an
 * unhandled rejection, which ends the process).
 */
function once<T>(read: () => Promise<T>): () => Promise<T> {
  let reading: Promise<T> | undefined;
  return () => (reading ??= read());
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
