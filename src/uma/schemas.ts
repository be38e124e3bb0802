/** JSON schemas of the UMA API's request bodies (checked with ajv; a 400 names the field). */

/** A scope: RFC 6749 scope-token characters (a URI is fine), no spaces. */
export const scopeName = {
  type: 'string',
  minLength: 1,
  maxLength: 256,
  pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$',
} as const;

const scopeList = { type: 'array', maxItems: 100, uniqueItems: true, items: scopeName } as const;

/**
 * UMA 2.0 Federated Authorization §3.1: a resource description. `resource_scopes` is REQUIRED
 * there (the scopes a permission may ask for on the resource); the other members are optional.
 * A PUT replaces the whole description (§3.2.3), so it needs `resource_scopes` too.
 */
export const RESOURCE_DESCRIPTION = {
  type: 'object',
  additionalProperties: false,
  required: ['resource_scopes'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 256 },
    type: { type: 'string', format: 'uri', maxLength: 2048 },
    resource_scopes: scopeList,
    description: { type: 'string', maxLength: 4096 },
    icon_uri: { type: 'string', format: 'uri', pattern: '^https?://', maxLength: 2048 },
  },
} as const;

export interface ResourceDescription {
  name?: string;
  type?: string;
  resource_scopes: string[];
  description?: string;
  icon_uri?: string;
}

/** Resources a ticket may name at most (UMA 2.0 Federated Authorization §4.1 allows an array). */
export const MAX_TICKET_PERMISSIONS = 20;

const permission = {
  type: 'object',
  additionalProperties: false,
  required: ['resource_id', 'resource_scopes'],
  properties: {
    resource_id: { type: 'string', minLength: 1, maxLength: 256 },
    resource_scopes: { ...scopeList, minItems: 1 },
  },
} as const;

/** POST /permission: one permission, or an array of them. */
export const PERMISSION_REQUEST = {
  oneOf: [permission, { type: 'array', minItems: 1, maxItems: MAX_TICKET_PERMISSIONS, items: permission }],
} as const;
