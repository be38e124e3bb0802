/**
 * The document-sharing example of docs/policy.md ("AuthZEN: a document-sharing example"): owners
 * may read, edit and delete; editors read and edit; viewers read. The team group (bob, carol)
 * edits the plan. One Rego policy and one Cedar policy set say the same thing.
 */

export const ENTITIES = [
  { type: 'user', id: 'alice' },
  { type: 'user', id: 'bob' },
  { type: 'user', id: 'carol' },
  { type: 'user', id: 'dave' },
  { type: 'document', id: 'plan', properties: { owner: 'alice' } },
  { type: 'document', id: 'budget', properties: { owner: 'alice' } },
  { type: 'document', id: 'notes', properties: { owner: 'bob' } },
];

/** Policy data `authzen`: the search candidates, and who shares what (read by the Rego policy). */
export const AUTHZEN_DATA = {
  entities: ENTITIES,
  actions: ['read', 'edit', 'delete'],
  sharing: {
    groups: { team: ['bob', 'carol'] },
    editors: { plan: ['group:team'] },
    viewers: { budget: ['dave'], notes: ['alice'] },
  },
};

export const SHARING_REGO = `package arbiter.access_evaluation

default decision := {"allow": false, "error": "access_denied", "error_description": "no sharing rule permits this action"}

sharing := data.authzen.sharing

evaluation := input.evaluation

permitted := {"owner": {"read", "edit", "delete"}, "editor": {"read", "edit"}, "viewer": {"read"}}

owner := entity.properties.owner if {
	some entity in data.authzen.entities
	entity.type == "document"
	entity.id == evaluation.resource.id
}

# A sharing list names users, or groups as "group:<name>" (searches follow group membership).
listed(names) if evaluation.subject.id in names

listed(names) if {
	some name in names
	startswith(name, "group:")
	evaluation.subject.id in object.get(sharing.groups, substring(name, 6, -1), [])
}

default role := null

role := "owner" if {
	owner == evaluation.subject.id
} else := "editor" if {
	listed(object.get(sharing.editors, evaluation.resource.id, []))
} else := "viewer" if {
	listed(object.get(sharing.viewers, evaluation.resource.id, []))
}

decision := {"allow": true, "obligations": {"role": role}} if {
	evaluation.subject.type == "user"
	evaluation.resource.type == "document"
	evaluation.action.name in permitted[role]
}
`;

const ref = (type: string, id: string) => ({ __entity: { type, id } });

/** Policy data `cedar.entities` for the Cedar policy set: group membership as parents, sharing as attributes. */
export const CEDAR_ENTITIES = [
  { uid: { type: 'user', id: 'alice' }, attrs: {}, parents: [] },
  { uid: { type: 'user', id: 'bob' }, attrs: {}, parents: [{ type: 'group', id: 'team' }] },
  { uid: { type: 'user', id: 'carol' }, attrs: {}, parents: [{ type: 'group', id: 'team' }] },
  { uid: { type: 'user', id: 'dave' }, attrs: {}, parents: [] },
  { uid: { type: 'group', id: 'team' }, attrs: {}, parents: [] },
  {
    uid: { type: 'document', id: 'plan' },
    attrs: { owner: ref('user', 'alice'), editors: [ref('group', 'team')], viewers: [] },
    parents: [],
  },
  {
    uid: { type: 'document', id: 'budget' },
    attrs: { owner: ref('user', 'alice'), editors: [], viewers: [ref('user', 'dave')] },
    parents: [],
  },
  {
    uid: { type: 'document', id: 'notes' },
    attrs: { owner: ref('user', 'bob'), editors: [], viewers: [ref('user', 'alice')] },
    parents: [],
  },
];

export const SHARING_CEDAR = `@id("owners")
@obligation_role("owner")
permit (principal is user, action in [Action::"read", Action::"edit", Action::"delete"], resource is document)
when { resource.owner == principal };

@id("editors")
@obligation_role("editor")
permit (principal is user, action in [Action::"read", Action::"edit"], resource is document)
when { principal in resource.editors && resource.owner != principal };

@id("viewers")
@obligation_role("viewer")
permit (principal is user, action == Action::"read", resource is document)
when { principal in resource.viewers && resource.owner != principal && !(principal in resource.editors) };
`;

/** [subject, action, document, decision, role when permitted] — the same under both engines. */
export const DECISION_TABLE: [string, string, string, boolean, string?][] = [
  ['alice', 'read', 'plan', true, 'owner'],
  ['alice', 'delete', 'plan', true, 'owner'],
  ['bob', 'edit', 'plan', true, 'editor'],
  ['carol', 'read', 'plan', true, 'editor'],
  ['bob', 'delete', 'plan', false],
  ['dave', 'read', 'plan', false],
  ['dave', 'read', 'budget', true, 'viewer'],
  ['dave', 'edit', 'budget', false],
  ['alice', 'read', 'notes', true, 'viewer'],
  ['alice', 'edit', 'notes', false],
  ['bob', 'delete', 'notes', true, 'owner'],
];

export const evaluationOf = (subject: string, action: string, document: string) => ({
  subject: { type: 'user', id: subject },
  action: { name: action },
  resource: { type: 'document', id: document },
});
