import type { ArbiterContext } from '../state.js';
import { HttpError } from '../../http/errors.js';
import {
  requestInput,
  type ClientInput,
  type DecisionInput,
  type GrantedResource,
  type PolicyEngine,
} from '../../policy/index.js';
import { enforce } from '../shared/enforce.js';
import { rememberDecision } from '../token/grants/decision.js';
import type { PresentedToken } from './initial-access-tokens.js';
import { invalidToken } from '../../http/bearer.js';
import type { SoftwareStatement } from './statement.js';
import { givenMembers, type ValidatedMetadata } from './validation.js';

/** What an allowing `register` decision gives the client. */
export interface RegistrationGrant {
  scopes: string[];
  grantTypes: ValidatedMetadata['grant_types'];
  grantedResources: GrantedResource[];
}

/** Who registers: the client as it stands for an update (RFC 7592), else an initial access token if one was presented. */
export type Registrant = { client: ClientInput } | { initialAccessToken: PresentedToken | null };

/**
 * Asks the `register` decision point (docs/policy.md) about validated metadata. A deny is a
 * 400 with the policy's code (invalid_client_metadata, invalid_software_statement,
 * unapproved_software_statement); an engine failure a 503.
 */
export async function decideRegistration(
  ctx: ArbiterContext,
  policy: PolicyEngine,
  body: Record<string, unknown>,
  metadata: ValidatedMetadata,
  statement: SoftwareStatement | null,
  registrant: Registrant,
): Promise<RegistrationGrant> {
  // Only the members registration reads: a read answer sent back whole (registration_access_token
  // included) or members of any size nobody reads are not recorded with the decision.
  const { software_statement: _statement, ...parameters } = givenMembers(body);
  const input: DecisionInput = {
    tenant: ctx.state.tenant.name,
    client: 'client' in registrant ? registrant.client : null,
    subject: null,
    request: requestInput({ endpoint: ctx.path, method: ctx.method, parameters }),
    registration: {
      metadata: { ...metadata },
      grant_types: metadata.grant_types,
      token_endpoint_auth_method: metadata.token_endpoint_auth_method,
      client_type: metadata.token_endpoint_auth_method === 'none' ? 'public' : 'confidential',
      software_statement: statement,
      initial_access_token: 'initialAccessToken' in registrant ? registrant.initialAccessToken : null,
    },
    time: new Date().toISOString(),
  };
  const outcome = await policy.decide('register', input);
  rememberDecision(ctx as never, outcome);
  // A policy that requires an initial access token answers invalid_token: a 401 with its challenge (RFC 6750).
  if (!outcome.decision.allow && outcome.decision.error === 'invalid_token' && !outcome.engineError)
    throw invalidToken(ctx, outcome.decision.error_description ?? 'an initial access token is required');
  enforce.http(outcome);
  const { scopes, extensions } = outcome.decision;
  return {
    scopes: (scopes ?? []).filter((scope) => typeof scope === 'string'),
    grantTypes: grantTypesOf(extensions?.grant_types, metadata.grant_types),
    grantedResources: grantedResourcesOf(extensions?.granted_resources),
  };
}

/** The grants the decision entitles, never beyond those asked for; none left is a denial. */
function grantTypesOf(decided: unknown, requested: ValidatedMetadata['grant_types']): ValidatedMetadata['grant_types'] {
  const grants = Array.isArray(decided) ? requested.filter((grant) => decided.includes(grant)) : requested;
  if (grants.length === 0)
    throw new HttpError(
      400,
      'invalid_client_metadata',
      'grant_types: the policy entitles none of the requested grant types',
      { field: 'grant_types' },
    );
  return grants;
}

function grantedResourcesOf(decided: unknown): GrantedResource[] {
  if (!Array.isArray(decided)) return [];
  return decided
    .filter(
      (entry): entry is GrantedResource =>
        typeof entry?.type === 'string' &&
        Array.isArray(entry?.scopes) &&
        entry.scopes.every((scope: unknown) => typeof scope === 'string'),
    )
    .map(({ type, scopes }) => ({ type, scopes: [...scopes] }));
}
