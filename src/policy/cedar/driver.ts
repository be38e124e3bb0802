/**
 * Cedar rules (kind "cedar"), evaluated in process with @cedar-policy/cedar-wasm.
 *
 * Cedar applies to a request when at least one bundled Cedar policy's action scope covers the
 * request's action; it then decides (permit → allow, otherwise deny). Annotations of the
 * determining policies carry outputs: @obligation_<name>("<value>"), @extension_<name>("<value>"),
 * and on a forbid @error("<code>") / @error_description("<text>"). See docs/policy.md.
 */
import type {
  ActionConstraint,
  Annotations,
  EntityJson,
  EntityUidJson,
  TypeAndId,
} from '@cedar-policy/cedar-wasm/nodejs';
import type { PolicySnapshot } from '../bundle/build.js';
import { valueAt } from '../bundle/data-tree.js';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import { cedarRequestsFor, type CedarRequest } from './mapping.js';
import { cedar, formatCedarErrors } from './wasm.js';

/** Entities policies may reference (groups, roles, action groups) come from this data key. */
export const CEDAR_ENTITIES_DATA_KEY = 'cedar.entities';

/**
 * The most entities, and the longest chain of parents, the data may give. Every decision hands
 * Cedar all of them, and Cedar works out every entity's ancestors each time: about 9 µs per
 * entity, and with a chain of 2,000 parents 1.5 s and 319 MB of Wasm memory per decision. At
 * these bounds a decision costs about 130 ms at most.
 */
export const MAX_CEDAR_ENTITIES = 10_000;

/**
 * About how much Cedar compiles for the snapshot: its rules' text and, when there is one, the
 * entity data it reads with them (JSON). Compiling takes about 1.7 ms per KB of rules, and
 * reading 10,000 entities some hundreds of ms.
 */
export function cedarCompileBytes(snapshot: PolicySnapshot): number {
  let bytes = 0;
  for (const rule of snapshot.rules) if (rule.kind === 'cedar') bytes += rule.content.length;
  if (bytes === 0) return 0;
  const entities = valueAt(snapshot.mergedData, CEDAR_ENTITIES_DATA_KEY);
  return bytes + (entities === undefined ? 0 : JSON.stringify(entities).length);
}
export const MAX_CEDAR_HIERARCHY_DEPTH = 32;

export type CedarVerdict =
  | { kind: 'none' }
  | { kind: 'decided'; allow: boolean; policies: string[]; outputs: CedarOutputs; evaluationErrors: string[] }
  | { kind: 'failed'; reason: string };

export interface CedarOutputs {
  obligations: Record<string, unknown>;
  extensions: Record<string, unknown>;
  error?: string;
  error_description?: string;
}

interface CompiledPolicy {
  effect: 'permit' | 'forbid';
  annotations: Annotations;
  action: ActionConstraint;
  /** The policy's source, shown by the Admin decision playground. */
  text: string;
}

interface CompiledSet {
  id: string;
  policies: Map<string, CompiledPolicy>;
  entities: EntityJson[];
}

export class CedarDriver {
  private compiled: { revision: string; set: CompiledSet | Error } | null = null;

  /** Never throws: whatever keeps Cedar from deciding is a failed verdict (fail closed). */
  evaluate(snapshot: PolicySnapshot, point: DecisionPoint, input: DecisionInput): CedarVerdict {
    const set = this.compiledFor(snapshot);
    if (set instanceof Error) return { kind: 'failed', reason: set.message };
    if (set.policies.size === 0) return { kind: 'none' };
    try {
      const requests = cedarRequestsFor(point, input);
      const { action } = requests[0]!; // one request per resource indicator, at least one
      if (![...set.policies.values()].some((policy) => coversAction(policy.action, action, set.entities)))
        return { kind: 'none' };
      return allOf(requests.map((request) => authorize(set, request)));
    } catch (error) {
      return { kind: 'failed', reason: `Cedar evaluation failed: ${(error as Error).message}` };
    }
  }

  /** Whether the set of `revision` is compiled here already (its next decisions compile nothing). */
  holds(revision: string): boolean {
    return this.compiled?.revision === revision;
  }

  /** The source of the named policies of the snapshot's set, for explaining a decision. */
  policyTexts(snapshot: PolicySnapshot, ids: string[]): { id: string; text: string }[] {
    const set = this.compiledFor(snapshot);
    if (set instanceof Error) return [];
    return ids.map((id) => ({ id, text: set.policies.get(id)?.text ?? '' }));
  }

  private compiledFor(snapshot: PolicySnapshot): CompiledSet | Error {
    if (this.compiled?.revision !== snapshot.revision) {
      // Cedar itself can throw on what it cannot read (a stack overflow on deep nesting): every decision then fails closed.
      this.compiled = { revision: snapshot.revision, set: compileOrError(snapshot) };
    }
    return this.compiled.set;
  }
}

function compileOrError(snapshot: PolicySnapshot): CompiledSet | Error {
  try {
    return compile(snapshot);
  } catch (error) {
    return new Error(`Cedar evaluation failed: ${(error as Error).message}`);
  }
}

/**
 * Any part of the policy set that cannot be made into Cedar fails every decision closed rather
 * than being skipped, since skipping a forbid (or the entity data that puts a principal in the
 * group a forbid names) would silently widen access: a rule that does not parse or convert
 * (one that bypassed the Admin API's check, or holds a template), a policy set Cedar refuses,
 * and entity data under `cedar.entities` that is not a Cedar entities JSON array.
 */
function compile(snapshot: PolicySnapshot): CompiledSet | Error {
  const policies = new Map<string, CompiledPolicy>();
  // Pairs made into Cedar's policy set at the end (Object.fromEntries): an id is the author's @id,
  // and one named __proto__ assigned to a plain object would set its prototype, its policy left out.
  const texts: [string, string][] = [];
  for (const rule of snapshot.rules.filter((candidate) => candidate.kind === 'cedar')) {
    const parts = cedar().policySetTextToParts(rule.content);
    if (parts.type === 'failure')
      return new Error(`Cedar rule ${rule.path} is invalid: ${formatCedarErrors(parts.errors, rule.content)}`);
    if (parts.policy_templates.length > 0)
      return new Error(`Cedar rule ${rule.path} is invalid: it holds a template, which no rule can link`);
    for (const [index, text] of parts.policies.entries()) {
      const parsed = cedar().policyToJson(text);
      if (parsed.type === 'failure')
        return new Error(
          `Cedar rule ${rule.path} is invalid: policy #${index} cannot be converted: ${formatCedarErrors(parsed.errors, text)}`,
        );
      const id = uniqueId(parsed.json.annotations?.id ?? `${rule.path}#${index}`, policies);
      policies.set(id, {
        effect: parsed.json.effect,
        annotations: parsed.json.annotations ?? {},
        action: parsed.json.action,
        text,
      });
      texts.push([id, text]);
    }
  }
  const id = `arbiter-${snapshot.revision}`;
  // Without Cedar policies nothing reads the entity data: a stray data key must not stop every decision.
  if (policies.size === 0) return { id, policies, entities: [] };
  const entities = dataEntities(snapshot);
  if (entities instanceof Error) return entities;
  const prepared = cedar().preparsePolicySet(id, { staticPolicies: Object.fromEntries(texts) });
  if (prepared.type === 'failure')
    return new Error(`Cedar policy set is invalid: ${formatCedarErrors(prepared.errors)}`);
  return { id, policies, entities };
}

function authorize(set: CompiledSet, request: CedarRequest): CedarVerdict {
  const answer = cedar().statefulIsAuthorized({
    principal: request.principal,
    action: request.action,
    resource: request.resource,
    context: request.context,
    preparsedPolicySetId: set.id,
    entities: mergeEntities(set.entities, request.entities),
  });
  if (answer.type === 'failure')
    return { kind: 'failed', reason: `Cedar evaluation failed: ${formatCedarErrors(answer.errors)}` };
  const { decision, diagnostics } = answer.response;
  // Cedar skips a policy whose condition errors (an attribute it lacks, say): a forbid skipped so
  // would let through what it was written to refuse, so its error fails the decision closed.
  const failedForbid = diagnostics.errors.find((error) => set.policies.get(error.policyId)?.effect === 'forbid');
  if (failedForbid && decision === 'allow')
    return {
      kind: 'failed',
      reason: `Cedar could not evaluate the forbid policy ${failedForbid.policyId}: ${failedForbid.error.message}`,
    };
  const determining = diagnostics.reason
    .map((id) => set.policies.get(id))
    .filter((policy): policy is CompiledPolicy => policy !== undefined);
  return {
    kind: 'decided',
    allow: decision === 'allow',
    policies: diagnostics.reason,
    outputs: outputsOf(decision === 'allow', determining),
    evaluationErrors: diagnostics.errors.map((error) => `${error.policyId}: ${error.error.message}`),
  };
}

/**
 * The verdicts of one decision's Cedar requests (one per resource indicator) as one: a failure
 * or a deny of any stands for all; an allow of all merges their outputs and determining policies.
 */
function allOf(verdicts: CedarVerdict[]): CedarVerdict {
  if (verdicts.length === 1) return verdicts[0]!;
  const refusing = verdicts.find(
    (verdict) => verdict.kind === 'failed' || (verdict.kind === 'decided' && !verdict.allow),
  );
  if (refusing) return refusing;
  const decided = verdicts.filter((verdict) => verdict.kind === 'decided');
  return {
    kind: 'decided',
    allow: true,
    policies: [...new Set(decided.flatMap((verdict) => verdict.policies))],
    outputs: {
      obligations: Object.fromEntries(decided.flatMap((verdict) => Object.entries(verdict.outputs.obligations))),
      extensions: Object.fromEntries(decided.flatMap((verdict) => Object.entries(verdict.outputs.extensions))),
    },
    evaluationErrors: decided.flatMap((verdict) => verdict.evaluationErrors),
  };
}

function outputsOf(allowed: boolean, determining: CompiledPolicy[]): CedarOutputs {
  const annotated = (prefix: string) =>
    Object.fromEntries(
      determining.flatMap(({ annotations }) =>
        Object.entries(annotations)
          .filter(([name]) => name.startsWith(prefix))
          .map(([name, value]) => [name.slice(prefix.length), annotationValue(value)]),
      ),
    );
  // Object.fromEntries, not assignments: an author's name is a key even when it is __proto__.
  const outputs: CedarOutputs = { obligations: annotated('obligation_'), extensions: annotated('extension_') };
  if (!allowed) {
    const explained = determining.find((policy) => policy.annotations.error);
    outputs.error = explained?.annotations.error ?? 'access_denied';
    outputs.error_description =
      explained?.annotations.error_description ??
      (determining.length ? 'denied by a Cedar policy' : 'no Cedar policy permits this request');
  }
  return outputs;
}

/** Annotation values are strings; JSON in them ("true", "5", "{...}") is decoded. */
function annotationValue(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function coversAction(scope: ActionConstraint, action: TypeAndId, entities: EntityJson[]): boolean {
  if (scope.op === 'All') return true;
  if (scope.op === '==') return 'entity' in scope && sameUid(scope.entity, action);
  const groups = 'entities' in scope ? scope.entities : [scope.entity];
  const lineage = [action, ...ancestorsOf(action, entities)];
  return groups.some((group) => lineage.some((member) => sameUid(group, member)));
}

function ancestorsOf(uid: TypeAndId, entities: EntityJson[], seen = new Set<string>()): TypeAndId[] {
  const entity = entities.find((candidate) => sameUid(candidate.uid, uid));
  const parents = (entity?.parents ?? []).map(plainUid).filter((parent) => !seen.has(keyOf(parent)));
  parents.forEach((parent) => seen.add(keyOf(parent)));
  return parents.flatMap((parent) => [parent, ...ancestorsOf(parent, entities, seen)]);
}

/** Data entities give hierarchy (parents) and stored attributes; what the request knows about the same entity wins. */
function mergeEntities(fromData: EntityJson[], fromRequest: EntityJson[]): EntityJson[] {
  const merged = new Map(fromData.map((entity) => [keyOf(plainUid(entity.uid)), entity]));
  for (const entity of fromRequest) {
    const key = keyOf(plainUid(entity.uid));
    const stored = merged.get(key);
    merged.set(key, stored ? { ...stored, attrs: { ...stored.attrs, ...entity.attrs } } : entity);
  }
  return [...merged.values()];
}

/** The entities of policy data, as Cedar reads them; absent means none, anything Cedar cannot read is an Error. */
function dataEntities(snapshot: PolicySnapshot): EntityJson[] | Error {
  const entities = valueAt(snapshot.mergedData, CEDAR_ENTITIES_DATA_KEY);
  if (entities === undefined) return [];
  const problem = `Cedar entities in policy data ${CEDAR_ENTITIES_DATA_KEY} cannot be converted`;
  if (!Array.isArray(entities))
    return new Error(
      `${problem}: not a Cedar entities JSON array (got ${entities === null ? 'null' : typeof entities})`,
    );
  if (entities.length > MAX_CEDAR_ENTITIES)
    return new Error(`${problem}: ${entities.length} entities, more than ${MAX_CEDAR_ENTITIES}`);
  const checked = cedar().checkParseEntities({ entities: entities as EntityJson[] });
  if (checked.type === 'failure') return new Error(`${problem}: ${formatCedarErrors(checked.errors)}`);
  // Entities are looked up by uid (parents, merging with the request's); a second entry would silently drop the first.
  const byKey = new Map<string, EntityJson>();
  for (const entity of entities as EntityJson[]) {
    const uid = plainUid(entity.uid);
    const key = keyOf(uid);
    if (byKey.has(key)) return new Error(`${problem}: the entity ${uid.type}::${JSON.stringify(uid.id)} appears twice`);
    byKey.set(key, entity);
  }
  const deep = deepestChain(byKey);
  if (deep)
    return new Error(
      `${problem}: the entity ${deep.type}::${JSON.stringify(deep.id)} has a chain of parents longer than ${MAX_CEDAR_HIERARCHY_DEPTH}`,
    );
  return entities as EntityJson[];
}

/** An entity whose chain of parents (among the data's entities) is longer than the bound, if any. */
function deepestChain(byKey: Map<string, EntityJson>): TypeAndId | null {
  const depths = new Map<string, number>();
  const depthOf = (key: string, path: Set<string>): number => {
    const known = depths.get(key);
    if (known !== undefined) return known;
    const entity = byKey.get(key);
    // A parent the data does not list ends the chain; so does one met again on it (a cycle).
    if (!entity || path.has(key) || path.size > MAX_CEDAR_HIERARCHY_DEPTH) return 0;
    path.add(key);
    const depth = 1 + Math.max(0, ...(entity.parents ?? []).map((parent) => depthOf(keyOf(plainUid(parent)), path)));
    path.delete(key);
    depths.set(key, depth);
    return depth;
  };
  for (const [key, entity] of byKey)
    if (depthOf(key, new Set()) > MAX_CEDAR_HIERARCHY_DEPTH + 1) return plainUid(entity.uid);
  return null;
}

function plainUid(uid: EntityUidJson): TypeAndId {
  return '__entity' in uid ? uid.__entity : uid;
}

function sameUid(a: EntityUidJson, b: EntityUidJson): boolean {
  return keyOf(plainUid(a)) === keyOf(plainUid(b));
}

function keyOf(uid: TypeAndId): string {
  return `${uid.type}::${JSON.stringify(uid.id)}`;
}

function uniqueId(wanted: string, taken: Map<string, unknown>): string {
  let id = wanted;
  for (let n = 2; taken.has(id); n += 1) id = `${wanted}~${n}`;
  return id;
}
