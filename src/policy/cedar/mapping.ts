/**
 * How a decision input becomes a Cedar request (documented in docs/policy.md, "Cedar"):
 *
 * | point              | principal                                        | action                       | resource                                  |
 * |--------------------|--------------------------------------------------|------------------------------|-------------------------------------------|
 * | access_evaluation  | <subject.type>::"<subject.id>"                   | Action::"<action.name>"      | <resource.type>::"<resource.id>"          |
 * | uma_permission     | Arbiter::Subject / Client / Anonymous            | Arbiter::Action::"<point>"   | Arbiter::UmaResource::"<resource_id>"     |
 * | delegation         | (same)                                           | (same)                       | Arbiter::UmaResource::"<resource_id>"     |
 * | every other point  | (same)                                           | (same)                       | Arbiter::Resource::"<request.resource>",  |
 * |                    |                                                  |                              | else Arbiter::Endpoint::"<endpoint>"      |
 *
 * A request with several resource indicators is one Cedar request per resource (cedarRequestsFor).
 *
 * The context is the whole decision input (plus `point`), converted to Cedar values.
 * policies/cedar/arbiter.cedarschema describes these entities, actions and each point's context
 * for policy authors; test/policy/cedar-pack.test.ts checks that it describes what this gives.
 */
import type { CedarValueJson, EntityJson, TypeAndId } from '@cedar-policy/cedar-wasm/nodejs';
import type {
  DecisionInput,
  DecisionPoint,
  EvaluationInput,
  PermissionInput,
  DelegationInput,
} from '../contract/types.js';

export interface CedarRequest {
  principal: TypeAndId;
  action: TypeAndId;
  resource: TypeAndId;
  context: Record<string, CedarValueJson>;
  /** Attributes the request itself knows about the principal and the resource. */
  entities: EntityJson[];
}

interface Party {
  uid: TypeAndId;
  attrs: Record<string, unknown>;
}

export function cedarRequestFor(point: DecisionPoint, input: DecisionInput): CedarRequest {
  const evaluation = point === 'access_evaluation' ? (input.evaluation as EvaluationInput) : null;
  const principal = evaluation ? authzenParty(evaluation.subject) : requestingParty(input);
  const resource = evaluation ? authzenParty(evaluation.resource) : resourceParty(point, input);
  const action = evaluation ? { type: 'Action', id: evaluation.action.name } : { type: 'Arbiter::Action', id: point };
  return {
    principal: principal.uid,
    action,
    resource: resource.uid,
    context: cedarRecord({ ...input, point }),
    entities: [principal, resource].map((party) => ({ uid: party.uid, attrs: cedarRecord(party.attrs), parents: [] })),
  };
}

/**
 * The Cedar requests a decision takes: one, except for a request naming several resource
 * indicators (RFC 8707, at `authorize`), which is one request per resource, each with that
 * resource as the Cedar resource. A policy about a resource (a forbid on its type, say) then
 * applies to it whether it is asked for alone or beside others.
 */
export function cedarRequestsFor(point: DecisionPoint, input: DecisionInput): CedarRequest[] {
  const indicators = input.request.resources ?? [];
  if (point === 'access_evaluation' || point === 'uma_permission' || point === 'delegation' || indicators.length < 2)
    return [cedarRequestFor(point, input)];
  return indicators.map((indicator) =>
    cedarRequestFor(point, { ...input, request: { ...input.request, ...indicator } } as DecisionInput),
  );
}

function requestingParty(input: DecisionInput): Party {
  if (input.subject) return { uid: { type: 'Arbiter::Subject', id: input.subject.sub }, attrs: { ...input.subject } };
  if (input.client) return { uid: { type: 'Arbiter::Client', id: input.client.client_id }, attrs: { ...input.client } };
  return { uid: { type: 'Arbiter::Anonymous', id: 'anonymous' }, attrs: {} };
}

function resourceParty(point: DecisionPoint, input: DecisionInput): Party {
  const uma =
    point === 'uma_permission'
      ? (input.permission as PermissionInput)
      : point === 'delegation'
        ? (input.delegation as DelegationInput)
        : null;
  if (uma) return { uid: { type: 'Arbiter::UmaResource', id: uma.resource_id }, attrs: { ...(uma.resource ?? {}) } };
  const { resource, resolved_resource_type: type, endpoint } = input.request;
  if (resource) return { uid: { type: 'Arbiter::Resource', id: resource }, attrs: type ? { type } : {} };
  return { uid: { type: 'Arbiter::Endpoint', id: endpoint }, attrs: {} };
}

function authzenParty(party: { type: string; id: string; properties?: Record<string, unknown> }): Party {
  return { uid: { type: cedarTypeName(party.type), id: party.id }, attrs: party.properties ?? {} };
}

/**
 * AuthZEN types are free text; Cedar entity types are `::`-separated identifiers. Other characters
 * become "_", and a segment that is a word Cedar reserves gets a "_" in front. Found 2026-11-30: a
 * type `if` or `__cedar` made Cedar refuse the request, which the engine took for its own failure:
 * any AuthZEN caller had a 503 and an error logged at will.
 */
export function cedarTypeName(type: string): string {
  return type
    .split('::')
    .map((segment) => segment.replace(/[^A-Za-z0-9_]/g, '_').replace(/^(?=[0-9]|$)/, '_'))
    .map((segment) => (CEDAR_RESERVED.has(segment) || segment.startsWith('__cedar') ? `_${segment}` : segment))
    .join('::');
}

/** Words Cedar does not take as identifiers (its grammar's reserved words; `__cedar` is reserved as a prefix). */
const CEDAR_RESERVED = new Set(['true', 'false', 'if', 'then', 'else', 'in', 'is', 'like', 'has']);

/**
 * JSON → Cedar values. Cedar has no null and no fractions, so nulls and non-integers are left
 * out; keys starting with "__" are left out so that request data can never pose as an entity
 * reference or extension value.
 */
export function cedarRecord(value: Record<string, unknown>): Record<string, CedarValueJson> {
  const record: Record<string, CedarValueJson> = {};
  for (const [key, item] of Object.entries(value)) {
    const converted = cedarValue(item);
    if (converted !== undefined && !key.startsWith('__')) record[key] = converted;
  }
  return record;
}

function cedarValue(value: unknown): CedarValueJson | undefined {
  if (typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (Array.isArray(value)) return value.map(cedarValue).filter((item): item is CedarValueJson => item !== undefined);
  if (typeof value === 'object' && value !== null) return cedarRecord(value as Record<string, unknown>);
  return undefined;
}
