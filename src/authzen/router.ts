import Router from '@koa/router';
import { recordDecision } from '../audit/index.js';
import { readJsonBody } from '../http/body.js';
import { HttpError, notFound } from '../http/errors.js';
import { routedApi, type RoutedApi } from '../http/router.js';
import { assertValid } from '../http/validation.js';
import type { ApiContext, ApiState, ClientCallers, TokenCallers } from '../uma/index.js';
import {
  enforceHttp,
  type ClientInput,
  type DecisionOutcome,
  type InputParties,
  type PolicyEngine,
} from '../policy/index.js';
import type { Store } from '../store/index.js';
import { candidatesFor, type Candidate } from './candidates.js';
import {
  authzenDecision,
  delegationsForResourceSearch,
  delegationsOnResource,
  delegationsPerPair,
  evaluationInput,
  requestOfEvaluation,
  type Asker,
  type AuthzenDecision,
  type DelegationsOf,
} from './evaluate.js';
import { pageOf, type PageRequest } from './paging.js';
import {
  EVALUATION,
  EVALUATIONS,
  SEARCHES,
  type Entity,
  MAX_EXPANDED_EVALUATION_BYTES,
  type Evaluation,
  type SearchKind,
  type Semantic,
} from './schemas.js';
import { requestIssuer } from '../tenancy/index.js';

export interface AuthzenDeps {
  store: Store;
  policy: PolicyEngine;
  /** Bearer callers (scope `authzen`) and Basic client callers (src/oauth). */
  callers: TokenCallers;
  clients: ClientCallers;
  parties: InputParties;
  issuer: string;
  maxBodyBytes: number;
  tenantExists(tenant: string): Promise<boolean>;
}

export const AUTHZEN_PATHS = {
  access_evaluation_endpoint: '/access/v1/evaluation',
  access_evaluations_endpoint: '/access/v1/evaluations',
  search_subject_endpoint: '/access/v1/search/subject',
  search_resource_endpoint: '/access/v1/search/resource',
  search_action_endpoint: '/access/v1/search/action',
} as const;

export const AUTHZEN_METADATA_PATH = '/.well-known/authzen-configuration';

/** The resource type whose `authzen` scope entitles a client to the API (policy data and software statements). */
const AUTHZEN_TYPE = 'urn:as:authzen';

/**
 * The AuthZEN 1.0 Authorization API (evaluation, evaluations, the three searches) and its PDP
 * metadata. Every decision is the `access_evaluation` point's; a batch or a search is one
 * engine round trip for all its evaluations (PolicyEngine.decideAll).
 */
export function authzenRouter(deps: AuthzenDeps): RoutedApi<ApiState> {
  const router = new Router<ApiState>({ sensitive: true, strict: true });
  router.get(AUTHZEN_METADATA_PATH, (ctx) => {
    ctx.body = metadata(requestIssuer(deps.issuer, ctx.state.tenant));
  });
  router.get(`${AUTHZEN_METADATA_PATH}/:tenant`, async (ctx) => {
    const tenant = String(ctx.params.tenant);
    if (!(await deps.tenantExists(tenant))) throw notFound('no such tenant');
    ctx.body = metadata(`${deps.issuer}/${tenant}`);
  });

  router.post(AUTHZEN_PATHS.access_evaluation_endpoint, async (ctx) => {
    const asker = await askerOf(ctx, deps);
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<Evaluation>(EVALUATION, body);
    const outcome = await deps.policy.decide(
      'access_evaluation',
      await evaluationInput(asker, evaluationOf(body), delegationsPerPair(deps.store, asker.tenant)),
    );
    ctx.body = single(ctx, outcome);
  });

  router.post(AUTHZEN_PATHS.access_evaluations_endpoint, async (ctx) => {
    const asker = await askerOf(ctx, deps);
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    assertValid<BatchRequest>(EVALUATIONS, body);
    if (!body.evaluations?.length) {
      // §7.1: without evaluations, the request is a single evaluation.
      assertValid<Evaluation>(EVALUATION, body);
      const outcome = await deps.policy.decide(
        'access_evaluation',
        await evaluationInput(asker, evaluationOf(body), delegationsPerPair(deps.store, asker.tenant)),
      );
      ctx.body = single(ctx, outcome);
      return;
    }
    ctx.body = { evaluations: await batch(ctx, deps, asker, body) };
  });

  for (const kind of ['subject', 'resource', 'action'] as const) {
    router.post(AUTHZEN_PATHS[`search_${kind}_endpoint`], async (ctx) => {
      const asker = await askerOf(ctx, deps);
      const body = await readJsonBody(ctx, deps.maxBodyBytes);
      assertValid<SearchRequest>(SEARCHES[kind], body);
      ctx.body = await search(ctx, deps, asker, kind, body);
    });
  }
  // X-Request-ID comes back on every answer (src/http/request-id.ts).
  return routedApi(router);
}

/**
 * PDP metadata (§9). `capabilities` lists registered URNs of the AuthZEN PDP Capabilities
 * registry; Arbiter uses none of them (its paging keys and semantics are the base spec's), so the
 * list is empty rather than absent: a PEP can tell "none" from "not said".
 */
function metadata(pdp: string): Record<string, unknown> {
  return {
    policy_decision_point: pdp,
    ...Object.fromEntries(Object.entries(AUTHZEN_PATHS).map(([field, path]) => [field, `${pdp}${path}`])),
    capabilities: [],
  };
}

/**
 * Who asks: a Bearer token with scope `authzen`, or a client's Basic credentials when the client
 * is entitled (registered scope `authzen`, or a `granted_resources` entry of type urn:as:authzen).
 */
async function askerOf(ctx: ApiContext, deps: AuthzenDeps): Promise<Asker> {
  const tenant = ctx.state.tenant.name;
  const basic = await deps.clients(ctx);
  const caller = basic ?? (await deps.callers(ctx, { scope: 'authzen', audience: AUTHZEN_TYPE }));
  const client = await deps.parties.client(tenant, caller.clientId, basic ? basic.method : 'bearer');
  if (!client) throw new HttpError(401, 'invalid_client', 'the client of this token no longer exists');
  if (basic && !entitled(client))
    throw new HttpError(403, 'access_denied', 'this client is not entitled to the AuthZEN API (scope authzen)');
  return { tenant, client, time: new Date().toISOString(), request: requestOfEvaluation(ctx.path) };
}

function entitled(client: ClientInput): boolean {
  return (
    client.scopes.includes('authzen') ||
    client.granted_resources.some((granted) => granted.type === AUTHZEN_TYPE && granted.scopes.includes('authzen'))
  );
}

/** The evaluation as the policy sees it: the AuthZEN fields only, unknown ones dropped. */
function evaluationOf(body: Evaluation): Evaluation {
  const entity = (value: Entity): Entity => ({
    type: value.type,
    id: value.id,
    ...(value.properties ? { properties: value.properties } : {}),
  });
  return {
    subject: entity(body.subject),
    action: { name: body.action.name, ...(body.action.properties ? { properties: body.action.properties } : {}) },
    resource: entity(body.resource),
    ...(body.context ? { context: body.context } : {}),
  };
}

/**
 * The evaluations a request makes (a batch's, the defaults taken; a search's, one per candidate),
 * within MAX_EXPANDED_EVALUATION_BYTES (each shared value measured once).
 */
function assertExpandedSize(
  merged: Partial<Evaluation>[],
  what = 'the evaluations, each with the defaults it takes,',
  advice = 'send a large context in fewer evaluations',
): void {
  const sizes = new Map<unknown, number>();
  const sizeOf = (value: unknown) => {
    if (value === undefined) return 0;
    let size = sizes.get(value);
    if (size === undefined) sizes.set(value, (size = JSON.stringify(value).length));
    return size;
  };
  let total = 0;
  for (const evaluation of merged) {
    total +=
      sizeOf(evaluation.subject) + sizeOf(evaluation.action) + sizeOf(evaluation.resource) + sizeOf(evaluation.context);
    if (total > MAX_EXPANDED_EVALUATION_BYTES)
      throw new HttpError(
        413,
        'invalid_request',
        `${what} are more than ${MAX_EXPANDED_EVALUATION_BYTES} bytes: ${advice}`,
      );
  }
}

function single(ctx: ApiContext, outcome: DecisionOutcome): AuthzenDecision {
  recordDecision(ctx.state, outcome);
  enforceHttp.decided(outcome);
  return authzenDecision(outcome);
}

interface BatchRequest extends Partial<Evaluation> {
  evaluations?: Partial<Evaluation>[];
  options?: { evaluations_semantic?: Semantic };
}

/**
 * §7: each item takes the top-level subject, action, resource and context for the keys it does
 * not have (a key it has replaces the whole default object). An item that is not a valid
 * evaluation then is a false decision with its error; the others are decided in one round trip.
 * The answers are in request order, cut after the first deny or permit as the semantic asks.
 */
async function batch(ctx: ApiContext, deps: AuthzenDeps, asker: Asker, body: BatchRequest): Promise<AuthzenDecision[]> {
  const merged = body.evaluations!.map((item) => ({
    subject: item.subject ?? body.subject,
    action: item.action ?? body.action,
    resource: item.resource ?? body.resource,
    context: item.context ?? body.context,
  }));
  assertExpandedSize(merged);
  const problems = merged.map((evaluation) =>
    problemOf(Object.fromEntries(Object.entries(evaluation).filter(([, value]) => value !== undefined))),
  );
  const delegationsOf = delegationsPerPair(deps.store, asker.tenant);
  const valid = merged
    .filter((_, index) => !problems[index])
    .map((evaluation) => evaluationOf(evaluation as Evaluation));
  const outcomes = await deps.policy.decideAll(
    'access_evaluation',
    await Promise.all(valid.map((evaluation) => evaluationInput(asker, evaluation, delegationsOf))),
  );
  recordDecision(ctx.state, ...outcomes);
  let next = 0; // one outcome per valid evaluation, in order
  const answers = problems.map((problem): AuthzenDecision =>
    problem
      ? { decision: false, context: { error: { status: 400, message: problem } } }
      : authzenDecision(outcomes[next++]!),
  );
  return cut(answers, body.options?.evaluations_semantic ?? 'execute_all');
}

function problemOf(evaluation: unknown): string | null {
  try {
    assertValid(EVALUATION, evaluation, 'the evaluation');
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

function cut(answers: AuthzenDecision[], semantic: Semantic): AuthzenDecision[] {
  if (semantic === 'execute_all') return answers;
  const stopAt = answers.findIndex((answer) => answer.decision === (semantic === 'permit_on_first_permit'));
  return stopAt < 0 ? answers : answers.slice(0, stopAt + 1);
}

interface SearchRequest {
  subject: Partial<Entity> & { type: string };
  action?: Evaluation['action'];
  resource: Partial<Entity> & { type: string };
  context?: Record<string, unknown>;
  page?: PageRequest;
}

/**
 * §8: the candidates of the searched kind (candidates.ts), each evaluated as the search's
 * evaluation with the candidate in place, in one round trip; the permitted ones, paged.
 */
async function search(
  ctx: ApiContext,
  deps: AuthzenDeps,
  asker: Asker,
  kind: SearchKind,
  body: SearchRequest,
): Promise<Record<string, unknown>> {
  const searchedType = kind === 'subject' ? body.subject.type : kind === 'resource' ? body.resource.type : null;
  const { candidates, truncated } = await candidatesFor(kind, searchedType, deps.store, deps.policy, asker.tenant);
  const expanded = candidates.map((candidate) => withCandidate(kind, body, candidate));
  // Found 2026-11-29: a 589 KB context, copied into each of 300 candidates' inputs, held the event
  // loop 1.7 s and took 218 MB; a batch had the bound, a search did not.
  assertExpandedSize(expanded, "the search's evaluations, one per candidate,", 'send a smaller context or properties');
  const evaluations = expanded.map(evaluationOf);
  const delegationsOf = searchDelegations(deps.store, asker.tenant, kind, body);
  const outcomes = await deps.policy.decideAll(
    'access_evaluation',
    await Promise.all(evaluations.map((evaluation) => evaluationInput(asker, evaluation, delegationsOf))),
  );
  recordDecision(ctx.state, ...outcomes);
  enforceHttp.decided(...outcomes);
  const permitted = candidates
    .filter((_, index) => outcomes[index]!.decision.allow) // one outcome per candidate
    .map((candidate) => resultOf(kind, candidate));
  const { page, ...criteria } = body;
  const paged = pageOf(permitted, page, criteria);
  return {
    page: paged.page,
    ...(truncated ? { context: { candidates_truncated: true } } : {}),
    results: paged.results,
  };
}

function withCandidate(kind: SearchKind, body: SearchRequest, candidate: Candidate): Evaluation {
  const base = {
    subject: body.subject,
    action: body.action,
    resource: body.resource,
    ...(body.context ? { context: body.context } : {}),
  } as Evaluation;
  if (kind === 'action') return { ...base, action: candidate as Evaluation['action'] };
  return { ...base, [kind]: candidate as Entity };
}

function resultOf(kind: SearchKind, candidate: Candidate): Record<string, string> {
  return kind === 'action'
    ? { name: (candidate as { name: string }).name }
    : { type: (candidate as Entity).type, id: (candidate as Entity).id };
}

function searchDelegations(store: Store, tenant: string, kind: SearchKind, body: SearchRequest): DelegationsOf {
  if (kind === 'subject') return delegationsOnResource(store, tenant, body.resource.id!);
  if (kind === 'resource') return delegationsForResourceSearch(store, tenant, body.subject.id!);
  return delegationsPerPair(store, tenant);
}
