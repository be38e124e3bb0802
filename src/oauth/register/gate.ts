import type { Context, Next } from 'koa';
import { decodeJwt } from 'jose';
import { HttpError } from '../../http/errors.js';
import { MAX_JSON_DEPTH, nestingExceeds, readJsonBody } from '../../http/body.js';
import { requestInput, type DecisionInput, type PolicyEngine } from '../../policy/index.js';
import { denial, rememberDecision } from '../grants/decision.js';
import { routes } from '../routes.js';

const DEFAULT_GRANT_TYPES = ['authorization_code', 'refresh_token'];
const DEFAULT_AUTH_METHOD = 'client_secret_basic';

/**
 * POST /register (RFC 7591) asks the `register` decision point before oidc-provider sees the
 * request: registration is policy-gated, never open by itself. A deny is a 400 with the
 * policy's error (invalid_client_metadata, invalid_software_statement, unapproved_software_statement).
 */
export function registrationGate(policy: PolicyEngine, maxBodyBytes: number) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (ctx.path !== routes.registration || ctx.method !== 'POST') return next();
    const metadata = await readJsonBody(ctx, maxBodyBytes);
    if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
      throw new HttpError(400, 'invalid_client_metadata', 'the registration request must be a JSON object');
    }
    // oidc-provider takes an already-read body from ctx.request.body; the audit log reads ctx.state.body.
    (ctx.request as unknown as { body: unknown }).body = metadata;
    ctx.state.body = metadata;
    const outcome = await policy.decide('register', registrationInput(ctx.state.tenant as string, ctx.path, metadata as Record<string, unknown>));
    rememberDecision(ctx as never, outcome);
    if (!outcome.decision.allow) throw asHttpError(denial(outcome));
    assertPublicSubjects(metadata as Record<string, unknown>);
    await next();
  };
}

/**
 * Arbiter's subjects are public (the spec: no pairwise identifiers). Refused here because
 * oidc-provider derives a pairwise client's sector from its first redirect URI before it
 * validates that URI, and a request with `subject_type: "pairwise"` and a redirect URI that
 * is no URL made it fail with a 500.
 */
function assertPublicSubjects(metadata: Record<string, unknown>): void {
  if (metadata.subject_type !== undefined && metadata.subject_type !== 'public') {
    throw new HttpError(400, 'invalid_client_metadata', "subject_type must be 'public'");
  }
}

function registrationInput(tenant: string, endpoint: string, metadata: Record<string, unknown>): DecisionInput {
  const grantTypes = Array.isArray(metadata.grant_types) ? metadata.grant_types.filter((grant): grant is string => typeof grant === 'string') : DEFAULT_GRANT_TYPES;
  const authMethod = typeof metadata.token_endpoint_auth_method === 'string' ? metadata.token_endpoint_auth_method : DEFAULT_AUTH_METHOD;
  const { software_statement: statement, ...rest } = metadata;
  return {
    tenant,
    client: null,
    subject: null,
    request: requestInput({ endpoint, method: 'POST', parameters: metadata }),
    registration: {
      metadata: rest,
      grant_types: grantTypes,
      token_endpoint_auth_method: authMethod,
      client_type: authMethod === 'none' ? 'public' : 'confidential',
      software_statement: statement === undefined ? null : { verified: false, claims: statementClaims(statement) },
    },
    time: new Date().toISOString(),
  };
}

/** The statement's claims, unverified: the policy decides whether its issuer is trusted. */
function statementClaims(statement: unknown): Record<string, unknown> {
  let claims: Record<string, unknown>;
  try {
    if (typeof statement !== 'string') throw new Error('not a string');
    claims = decodeJwt(statement) as Record<string, unknown>;
  } catch {
    throw new HttpError(400, 'invalid_software_statement', 'software_statement must be a signed JWT');
  }
  // The claims become policy input and part of the audit entry: as shallow as a JSON body must be.
  if (nestingExceeds(Buffer.from(statement.split('.')[1], 'base64url').toString('utf8'), MAX_JSON_DEPTH)) {
    throw new HttpError(400, 'invalid_software_statement', `the software_statement's claims nest deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return claims;
}

/** Registration errors are JSON like the Admin API's; the policy's code and status are kept. */
function asHttpError(error: Error): HttpError {
  const { status, error: code, error_description: description } = error as unknown as { status?: number; error?: string; error_description?: string };
  return new HttpError(status ?? 400, code ?? 'access_denied', description ?? 'denied by policy');
}
