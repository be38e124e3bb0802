/**
 * JSON schemas of the AuthZEN 1.0 request bodies. Unknown fields are ignored (AuthZEN's
 * information model is open); what a field must be when present is checked, so a 400 names it.
 */

const properties = { type: 'object' } as const;
const text = (maxLength: number) => ({ type: 'string', minLength: 1, maxLength }) as const;

const SUBJECT = {
  type: 'object',
  required: ['type', 'id'],
  properties: { type: text(256), id: text(1024), properties },
} as const;
const ACTION = { type: 'object', required: ['name'], properties: { name: text(256), properties } } as const;
const RESOURCE = SUBJECT;
/** An entity searched for: its type only (an id, when present, is ignored). */
const SEARCHED = { type: 'object', required: ['type'], properties: { type: text(256), properties } } as const;

/** POST /access/v1/evaluation (AuthZEN 1.0 §6.1). */
export const EVALUATION = {
  type: 'object',
  required: ['subject', 'action', 'resource'],
  properties: { subject: SUBJECT, action: ACTION, resource: RESOURCE, context: { type: 'object' } },
} as const;

export const SEMANTICS = ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'] as const;
export type Semantic = (typeof SEMANTICS)[number];

/**
 * At most this many bytes of evaluations in one batch once each item has taken the top-level
 * defaults: each evaluation is a decision input of its own (serialized, evaluated, audited), so a
 * large shared `context` times 1,000 items would be hundreds of MB of work from a 1 MB body.
 */
export const MAX_EXPANDED_EVALUATION_BYTES = 4 * 1024 * 1024;

/** At most this many evaluations in one batch. */
export const MAX_EVALUATIONS = 1000;

/**
 * POST /access/v1/evaluations (§7.1): the payload's shape. Each item, once merged with the
 * defaults, is checked against EVALUATION on its own: a failing item is a `false` decision.
 */
export const EVALUATIONS = {
  type: 'object',
  properties: {
    subject: { type: 'object' },
    action: { type: 'object' },
    resource: { type: 'object' },
    context: { type: 'object' },
    evaluations: { type: 'array', maxItems: MAX_EVALUATIONS, items: { type: 'object' } },
    options: { type: 'object', properties: { evaluations_semantic: { enum: SEMANTICS } } },
  },
} as const;

const PAGE = {
  type: 'object',
  properties: {
    token: { type: 'string', maxLength: 2048 },
    limit: { type: 'integer', minimum: 0, maximum: 1000 },
    properties,
  },
} as const;

/** The search APIs (§8): the searched-for entity gives its type only. */
export const SEARCHES = {
  subject: {
    type: 'object',
    required: ['subject', 'action', 'resource'],
    properties: { subject: SEARCHED, action: ACTION, resource: RESOURCE, context: { type: 'object' }, page: PAGE },
  },
  resource: {
    type: 'object',
    required: ['subject', 'action', 'resource'],
    properties: { subject: SUBJECT, action: ACTION, resource: SEARCHED, context: { type: 'object' }, page: PAGE },
  },
  action: {
    type: 'object',
    required: ['subject', 'resource'],
    properties: { subject: SUBJECT, resource: RESOURCE, context: { type: 'object' }, page: PAGE },
  },
} as const;

export type SearchKind = keyof typeof SEARCHES;

export interface Entity {
  type: string;
  id: string;
  properties?: Record<string, unknown>;
}

export interface Evaluation {
  subject: Entity;
  action: { name: string; properties?: Record<string, unknown> };
  resource: Entity;
  context?: Record<string, unknown>;
}
