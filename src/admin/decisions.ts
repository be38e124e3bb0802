import type Router from '@koa/router';
import type { AuditEntry, AuditLog } from '../audit/index.js';
import { eachRecorded, recordDecision } from '../audit/index.js';
import { readJsonBody } from '../http/body.js';
import { badRequest, HttpError } from '../http/errors.js';
import { assertValid } from '../http/validation.js';
import {
  checkInput,
  DECISION_POINTS,
  type DecisionExplanation,
  type DecisionInput,
  type DecisionPoint,
  type PolicyEngine,
} from '../policy/index.js';
import { storeTenant } from '../tenancy/index.js';
import { auditEntryOf } from './audit-routes.js';
import { callerOf, type AdminContext } from './state.js';

export interface DecisionRouteOptions {
  policy: Pick<PolicyEngine, 'explain' | 'revisions'>;
  audit: AuditLog;
  maxBodyBytes: number;
  tenantOf: (ctx: AdminContext, body?: unknown) => string | null;
}

/** The body of POST /decisions (also the OpenAPI document's DecisionRequest). */
export const PLAYGROUND_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['point', 'input'],
  properties: {
    point: { enum: [...DECISION_POINTS] },
    input: {
      type: 'object',
      description: "the point's policy input (docs/policy.md); `tenant` and `time` are filled in when absent",
    },
    tenantId: { type: ['string', 'null'] },
  },
};

/**
 * The playground's input is read up to this size (or MAX_BODY_BYTES when smaller): an input is a
 * few kilobytes, and OPA's full trace of a decision grows with it (a 700 KB input made the
 * managed OPA, which decides protocol traffic too, hold a gigabyte).
 */
const PLAYGROUND_MAX_BODY_BYTES = 32 * 1024;

/** Explanations (playground, replay) waiting or under way in a process, beyond which a call is a 503. */
const EXPLANATIONS_AT_MOST = 4;

/**
 * Runs what it is given one at a time, in order, with at most `atMost` waiting or running: a
 * further call is refused with a 503 at once. OPA's traces are explained one by one, so that no
 * number of callers makes OPA hold several at once.
 */
export function oneAtATime(atMost: number) {
  let tail: Promise<void> = Promise.resolve();
  let queued = 0;
  return async <T>(run: () => Promise<T>): Promise<T> => {
    if (queued >= atMost)
      throw new HttpError(503, 'temporarily_unavailable', 'other explanations are under way: try again shortly');
    queued += 1;
    const previous = tail;
    let release!: () => void;
    tail = new Promise<void>((resolve) => (release = resolve));
    try {
      await previous;
      return await run();
    } finally {
      queued -= 1;
      release();
    }
  };
}

/** The decision fields a replay compares, then the engines' verdicts. */
const COMPARED_FIELDS = [
  'allow',
  'scopes',
  'authorization_details',
  'obligations',
  'extensions',
  'jit_single_use',
  'error',
  'error_description',
];

/**
 * The decision playground: POST /decisions runs a decision exactly as the endpoints do, against
 * the live engines, and says why (Rego rules and trace, Cedar policies); POST
 * /audit-logs/{id}/replay runs an audited decision's input again against today's policy and
 * shows what changed. Neither issues nor stores anything but its own audit entry.
 */
export function decisionRoutes(router: Router, options: DecisionRouteOptions): void {
  const explaining = oneAtATime(EXPLANATIONS_AT_MOST);
  router.post('/decisions', async (ctx) => {
    const body = await readJsonBody(ctx, Math.min(options.maxBodyBytes, PLAYGROUND_MAX_BODY_BYTES));
    assertValid<{ point: DecisionPoint; input: Record<string, unknown>; tenantId?: string | null }>(
      PLAYGROUND_BODY,
      body,
    );
    const tenant = storeTenant(options.tenantOf(ctx, body));
    const input = { time: new Date().toISOString(), ...body.input, tenant: body.input.tenant ?? tenant };
    if (input.tenant !== tenant)
      throw badRequest(`input.tenant must be the tenant of the request (${tenant})`, { field: 'input.tenant' });
    const problem = checkInput(body.point, input);
    if (problem) throw badRequest(`input is not a valid ${body.point} input: ${problem}`, { field: 'input' });
    const explanation = await explaining(() => options.policy.explain(body.point, input as DecisionInput));
    record(ctx, explanation, input as DecisionInput);
    ctx.body = { ...shownTo(ctx, explanation), policyRevision: await options.policy.revisions() };
  });

  router.post('/audit-logs/:id/replay', async (ctx) => {
    const entry = await auditEntryOf(ctx, options.audit, options.tenantOf);
    const asked = decisionsOf(entry);
    // One after the other: an entry of an AuthZEN batch holds up to a hundred decisions, and
    // traced evaluations are slow; the operator's replay must not crowd out OPA's protocol traffic.
    const replays = await explaining(async () => {
      const done = [];
      for (const { point, input, then } of asked) {
        const now = shownTo(ctx, await options.policy.explain(point, input));
        done.push({ point, then, now, differences: differencesOf(then, now) });
      }
      return done;
    });
    const single = replays.length === 1 ? replays[0] : undefined;
    ctx.body = {
      entryId: entry.id,
      point: single ? single.point : replays.map((replay) => replay.point),
      then: single ? single.then : replays.map((replay) => replay.then),
      now: single ? single.now : replays.map((replay) => replay.now),
      changed: replays.some((replay) => replay.differences.length > 0),
      differences: replays.flatMap((replay, index) =>
        replay.differences.map((difference) =>
          single ? difference : { ...difference, field: `[${index}].${difference.field}` },
        ),
      ),
      policyRevision: await options.policy.revisions(),
    };
  });
}

/**
 * What a key confined to tenants may not read through GET /policy-rules (the shared policy), it
 * does not read here either: OPA's trace (the rules' bodies) and the Cedar policies' text are
 * left out; the rules hit, their locations and the policies' ids stay. Found 2026-11-29: a
 * confined read-only key read the text of any shared policy its made-up input made apply.
 */
function shownTo(ctx: AdminContext, explanation: DecisionExplanation): DecisionExplanation {
  if (!callerOf(ctx).tenants) return explanation;
  const { rego, cedar } = explanation.engines;
  return {
    ...explanation,
    engines: {
      rego: { ...rego, trace: [] },
      cedar: { ...cedar, policies: cedar.policies.map(({ id }) => ({ id, text: '' })) },
    },
  };
}

/** The playground's own audit entry holds what it evaluated, as a protocol request's does. */
function record(ctx: AdminContext, explanation: DecisionExplanation, input: DecisionInput): void {
  const engines = { rego: explanation.engines.rego.verdict, cedar: explanation.engines.cedar.verdict };
  recordDecision(ctx.state, {
    point: explanation.point,
    decision: explanation.decision,
    input,
    engines,
    ...(explanation.engineError ? { engineError: explanation.engineError } : {}),
  });
}

interface AskedDecision {
  point: DecisionPoint;
  input: DecisionInput;
  then: Record<string, unknown>;
}

/** The decisions an audit entry holds (one, or one per UMA permission / AuthZEN item), with their points. */
function decisionsOf(entry: AuditEntry): AskedDecision[] {
  const inputs = eachRecorded(entry.policyInput);
  const decisions = eachRecorded(entry.policyDecision);
  if (inputs === null || decisions === null || inputs.length !== decisions.length) {
    throw badRequest(`audit log entry ${entry.id} holds no policy decision to replay`);
  }
  return inputs.map((input, index) => {
    const then = decisions[index] as Record<string, unknown>;
    const point = then.point ?? pointOfRequest(input as DecisionInput);
    if (!DECISION_POINTS.includes(point as DecisionPoint))
      throw badRequest(`audit log entry ${entry.id} does not say which decision point it asked`);
    return { point: point as DecisionPoint, input: input as DecisionInput, then };
  });
}

/** Entries written before decisions recorded their point: the point follows from the endpoint and grant. */
function pointOfRequest(input: DecisionInput): DecisionPoint | undefined {
  const { endpoint, grant_type: grantType } = input.request ?? {};
  if (endpoint === '/token')
    return grantType === 'urn:ietf:params:oauth:grant-type:token-exchange'
      ? 'token_exchange'
      : grantType === 'urn:ietf:params:oauth:grant-type:uma-ticket'
        ? 'uma_permission'
        : 'token';
  const byPrefix: [string, DecisionPoint][] = [
    ['/authorize', 'authorize'],
    ['/introspect', 'introspect'],
    ['/register', 'register'],
    ['/access/v1', 'access_evaluation'],
    ['/permission', 'uma_permission'],
    ['/delegation', 'delegation'],
  ];
  return byPrefix.find(([prefix]) => typeof endpoint === 'string' && endpoint.startsWith(prefix))?.[1];
}

function differencesOf(
  then: Record<string, unknown>,
  now: DecisionExplanation,
): { field: string; then: unknown; now: unknown }[] {
  const thenEngines = (then.engines ?? {}) as Record<string, unknown>;
  const pairs: [string, unknown, unknown][] = [
    ...COMPARED_FIELDS.map((field): [string, unknown, unknown] => [
      field,
      then[field],
      (now.decision as unknown as Record<string, unknown>)[field],
    ]),
    ['engines.rego', thenEngines.rego, now.engines.rego.verdict],
    ['engines.cedar', thenEngines.cedar, now.engines.cedar.verdict],
  ];
  return pairs
    .filter(([, before, after]) => canonical(before) !== canonical(after))
    .map(([field, before, after]) => ({ field, then: before ?? null, now: after ?? null }));
}

/** JSON with sorted keys, so that equal objects compare equal whatever their key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value ?? null, (_, inner) =>
    inner && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => a.localeCompare(b)))
      : inner,
  );
}
