import { resourceRecords, resourceTypeRecords, subjectRecords } from '../catalog/index.js';
import type { PolicyEngine } from '../policy/index.js';
import type { Store } from '../store/index.js';
import type { Entity, SearchKind } from './schemas.js';

/** At most this many candidates are evaluated by one search; beyond, the search says it was truncated. */
export const MAX_CANDIDATES = 5000;

/** The policy data key whose `entities` and `actions` are search candidates. */
export const AUTHZEN_DATA_KEY = 'authzen';

interface AuthzenData {
  entities?: unknown;
  actions?: unknown;
}

export type Candidate = Entity | { name: string; properties?: Record<string, unknown> };

/**
 * What a search evaluates (docs/policy.md, "AuthZEN search"): the entities of the searched type
 * in policy data (`authzen.entities`, with their properties), plus for subjects of type `user`
 * the tenant's subjects, and for resources the tenant's Admin API resources of that type; for
 * actions, the names in `authzen.actions`. Duplicates (same type and id) count once, policy
 * data first.
 */
export async function candidatesFor(
  kind: SearchKind,
  type: string | null,
  store: Store,
  policy: PolicyEngine,
  tenant: string,
): Promise<{ candidates: Candidate[]; truncated: boolean }> {
  const data = ((await policy.policyData(AUTHZEN_DATA_KEY)) ?? {}) as AuthzenData;
  let found: Candidate[];
  if (kind === 'action') {
    found = (Array.isArray(data.actions) ? data.actions : [])
      .filter((name): name is string => typeof name === 'string' && name !== '')
      .map((name) => ({ name }));
  } else {
    const fromData = (Array.isArray(data.entities) ? data.entities : []).filter(
      (entity): entity is Entity => isEntity(entity) && entity.type === type,
    );
    const fromStore =
      kind === 'subject' ? await subjectsOf(store, tenant, type!) : await resourcesOf(store, tenant, type!);
    found = unique([...fromData, ...fromStore]);
  }
  return { candidates: found.slice(0, MAX_CANDIDATES), truncated: found.length > MAX_CANDIDATES };
}

function isEntity(value: unknown): value is Entity {
  const entity = value as Entity;
  return (
    typeof entity?.type === 'string' &&
    typeof entity.id === 'string' &&
    (entity.properties === undefined ||
      (typeof entity.properties === 'object' && entity.properties !== null && !Array.isArray(entity.properties)))
  );
}

async function subjectsOf(store: Store, tenant: string, type: string): Promise<Entity[]> {
  if (type !== 'user') return [];
  const subjects = await subjectRecords(store, tenant).find({}, { limit: MAX_CANDIDATES + 1 });
  return subjects.map((subject) => ({ type, id: subject.subjectId }));
}

async function resourcesOf(store: Store, tenant: string, type: string): Promise<Entity[]> {
  const definition = await resourceTypeRecords(store, tenant).findOne({
    typeUri: type,
  });
  if (!definition) return [];
  const resources = await resourceRecords(store, tenant).find(
    { resourceTypeId: definition.id as number },
    { limit: MAX_CANDIDATES + 1 },
  );
  return resources.map((resource) => ({ type, id: resource.resourceIdentifier }));
}

function unique(entities: Entity[]): Entity[] {
  const seen = new Set<string>();
  return entities.filter((entity) => {
    const key = JSON.stringify([entity.type, entity.id]);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
