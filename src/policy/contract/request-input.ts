import type { AuthorizationDetail, RequestInput, ResourceIndicatorInput } from './types.js';

/**
 * Parameters that carry credentials or bearer material. Policies never need them, and the
 * input is written to the audit log, so they are dropped before a decision.
 */
const CREDENTIAL_PARAMETERS = new Set([
  'client_secret',
  'client_assertion',
  'code',
  'code_verifier',
  'refresh_token',
  'subject_token',
  'actor_token',
  'token',
  'assertion',
  'password',
  'software_statement',
  // RFC 7592: a client's read answer, sent back in an update, carries its registration access token.
  'registration_access_token',
  // The UMA grant: a permission ticket, a claim token (an access token), an RPT, a PCT.
  'ticket',
  'claim_token',
  'rpt',
  'pct',
  // RFC 8628: the device code a device polls with, the user code a person enters.
  'device_code',
  'user_code',
  // Tokens named at /authorize and elsewhere: an ID token (a silent re-authentication's hint, or
  // sent as a parameter), CIBA's login hint token, an access token sent as a form parameter, a
  // back-channel logout token, and a signed request object (which may carry any of them; its
  // parameters are the request's parameters already).
  'id_token_hint',
  'id_token',
  'login_hint_token',
  'access_token',
  'logout_token',
  'request',
]);

export interface RequestInputParts {
  endpoint: string;
  method?: string;
  parameters?: Record<string, unknown>;
  grant_type?: string | null;
  scopes?: string[];
  resource?: string | null;
  resolved_resource_type?: string | null;
  /** Every resource indicator of the request; by default the one `resource` names (none when it is null). */
  resources?: ResourceIndicatorInput[];
  resource_types?: string[];
  authorization_details?: AuthorizationDetail[];
}

/**
 * Builds `input.request` from the raw request parameters: fields not given explicitly are
 * derived from the parameters (scope split on spaces, resource_types on commas,
 * authorization_details parsed from JSON), and credential parameters are removed.
 */
export function requestInput(parts: RequestInputParts): RequestInput {
  const parameters = parts.parameters ?? {};
  const resource = parts.resource !== undefined ? parts.resource : stringParameter(parameters.resource);
  const resolvedType = parts.resolved_resource_type ?? null;
  return {
    endpoint: parts.endpoint,
    method: parts.method ?? 'POST',
    parameters: withoutCredentials(parameters),
    grant_type: parts.grant_type ?? stringParameter(parameters.grant_type),
    scopes: parts.scopes ?? splitList(parameters.scope, ' '),
    resource,
    resolved_resource_type: resolvedType,
    resources: parts.resources ?? (resource ? [{ resource, resolved_resource_type: resolvedType }] : []),
    resource_types: parts.resource_types ?? splitList(parameters.resource_types, ','),
    authorization_details: parts.authorization_details ?? parseAuthorizationDetails(parameters.authorization_details),
  };
}

export function withoutCredentials(parameters: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(parameters).filter(([name]) => !CREDENTIAL_PARAMETERS.has(name)));
}

/** A parameter's one value; a repeated parameter (several `resource`s) has none. */
function stringParameter(value: unknown): string | null {
  if (Array.isArray(value)) return value.length === 1 ? stringParameter(value[0]) : null;
  return typeof value === 'string' && value !== '' ? value : null;
}

function splitList(value: unknown, separator: string): string[] {
  if (Array.isArray(value)) return value.flatMap((item) => splitList(item, separator));
  if (typeof value !== 'string') return [];
  return value
    .split(separator)
    .map((item) => item.trim())
    .filter(Boolean);
}

/** Malformed details yield []; rejecting them (invalid_authorization_details) is the protocol code's job. */
function parseAuthorizationDetails(value: unknown): AuthorizationDetail[] {
  let parsed = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch {
      return [];
    }
  }
  if (!Array.isArray(parsed)) return [];
  return parsed.filter(
    (item): item is AuthorizationDetail => typeof item === 'object' && item !== null && typeof item.type === 'string',
  );
}
