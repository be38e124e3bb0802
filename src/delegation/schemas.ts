import { scopeName } from '../uma/index.js';

const instant = { type: 'string', format: 'date-time', maxLength: 64 } as const;
const identifier = { type: 'string', minLength: 1, maxLength: 256 } as const;

/** POST /delegation (spec: Delegation). Which grantee field goes with which grantee_type is checked after the schema. */
export const DELEGATION_REQUEST = {
  type: 'object',
  additionalProperties: false,
  required: ['grantee_type', 'resource_id', 'scopes'],
  properties: {
    grantee_type: { enum: ['subject', 'client'] },
    grantee_subject_id: identifier,
    // The spec's "internal client key": a client_id; an integer is taken as its decimal form.
    grantee_client_id: { oneOf: [identifier, { type: 'integer', minimum: 0 }] },
    resource_id: identifier,
    scopes: { type: 'array', minItems: 1, maxItems: 100, uniqueItems: true, items: scopeName },
    expires_at: { oneOf: [instant, { type: 'null' }] },
  },
} as const;

export interface DelegationRequest {
  grantee_type: 'subject' | 'client';
  grantee_subject_id?: string;
  grantee_client_id?: string | number;
  resource_id: string;
  scopes: string[];
  expires_at?: string | null;
}

/** PUT /delegation/{id}: only expires_at changes; the other fields may be repeated, unchanged. */
export const DELEGATION_UPDATE = {
  type: 'object',
  additionalProperties: false,
  required: ['expires_at'],
  properties: { ...DELEGATION_REQUEST.properties },
} as const;
