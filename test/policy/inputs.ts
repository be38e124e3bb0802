/** Decision inputs per point, shaped as docs/policy.md prescribes for the protocol code. */
import type { ClientInput, DecisionInput, SubjectInput, UmaResourceInput } from '../../src/policy/index.js';
import { alice, confidentialClient, decisionInput, publicClient } from './support.js';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

export function authorizeInput(scope: string, extra: { authorization_details?: unknown[] } = {}): DecisionInput {
  const parameters: Record<string, unknown> = {
    response_type: 'code',
    client_id: publicClient.client_id,
    redirect_uri: 'https://spa.example/cb',
    scope,
    state: 'xyz',
  };
  if (extra.authorization_details) parameters.authorization_details = JSON.stringify(extra.authorization_details);
  return decisionInput({
    client: publicClient,
    subject: alice,
    request: { endpoint: '/authorize', method: 'GET', parameters },
  });
}

export function clientCredentialsInput(
  client: ClientInput,
  parameters: Record<string, unknown> = {},
  resolvedType: string | null = null,
): DecisionInput {
  return decisionInput({
    client,
    request: {
      endpoint: '/token',
      parameters: { grant_type: 'client_credentials', client_secret: 'never-sent-to-policy', ...parameters },
      resolved_resource_type: resolvedType,
    },
  });
}

export function authorizationCodeInput(grantedAtAuthorize: string[]): DecisionInput {
  return decisionInput({
    client: publicClient,
    subject: alice,
    request: {
      endpoint: '/token',
      parameters: { grant_type: 'authorization_code', code: 'secret-code', redirect_uri: 'https://spa.example/cb' },
      scopes: grantedAtAuthorize,
    },
  });
}

export function tokenExchangeInput(scope: string): DecisionInput {
  return decisionInput(
    {
      client: confidentialClient,
      subject: alice,
      request: { endpoint: '/token', parameters: { grant_type: TOKEN_EXCHANGE, scope, subject_token: 'secret' } },
    },
    {
      subject_token: {
        token_type: 'urn:ietf:params:oauth:token-type:access_token',
        active: true,
        iss: 'http://127.0.0.1:9000',
        sub: 'alice',
        // The exchanging client's own token (another client's needs may_act or a delegation).
        client_id: confidentialClient.client_id,
        scopes: ['openid', 'invoices.read'],
        resource: null,
        exp: Math.floor(Date.now() / 1000) + 600,
      },
      actor_token: null,
    },
  );
}

export function introspectInput(callerScopes: string[]): DecisionInput {
  const now = Math.floor(Date.now() / 1000);
  return decisionInput(
    {
      client: confidentialClient,
      subject: alice,
      request: { endpoint: '/introspect', parameters: { token: 'secret', token_type_hint: 'access_token' } },
    },
    {
      token: {
        active: true,
        token_type: 'access_token',
        client_id: 'spa',
        sub: 'alice',
        scopes: ['openid', 'invoices.read'],
        resource: null,
        resource_types: [],
        authorization_details: [],
        exp: now + 600,
        iat: now,
      },
      caller: { method: 'bearer', scopes: callerScopes, resource_server: null },
      context: {},
    },
  );
}

export function registerInput(softwareStatementClaims: Record<string, unknown> | null): DecisionInput {
  const metadata = {
    redirect_uris: ['https://app.example/cb'],
    grant_types: ['client_credentials'],
    client_name: 'App',
  };
  return decisionInput(
    { client: null, request: { endpoint: '/register', parameters: { ...metadata, software_statement: 'eyJ...' } } },
    {
      registration: {
        metadata,
        grant_types: ['client_credentials'],
        token_endpoint_auth_method: 'client_secret_basic',
        client_type: 'confidential',
        // Verified, as protocol code verifies every statement of a trusted issuer.
        software_statement: softwareStatementClaims ? { verified: true, claims: softwareStatementClaims } : null,
      },
    },
  );
}

export function evaluationInput(
  subjectId: string,
  action: string,
  resource: { id: string; properties: Record<string, unknown> },
  subjectProperties: Record<string, unknown> = {},
): DecisionInput {
  const evaluation = {
    subject: { type: 'user', id: subjectId, properties: subjectProperties },
    action: { name: action },
    resource: { type: 'document', ...resource },
    context: { ip: '192.0.2.1' },
  };
  return decisionInput(
    { client: confidentialClient, request: { endpoint: '/access/v1/evaluation', parameters: evaluation } },
    { evaluation },
  );
}

export const photo: UmaResourceInput = {
  _id: 'r1',
  name: 'Holiday',
  type: 'https://photos.example/photo',
  resource_scopes: ['view', 'print'],
  owner: { sub: 'alice', client_id: null },
};

export function permissionInput(subject: SubjectInput, scopes: string[]): DecisionInput {
  const body = { resource_id: photo._id, resource_scopes: scopes };
  return decisionInput(
    { client: confidentialClient, subject, request: { endpoint: '/permission', parameters: body } },
    { permission: { operation: 'ticket', ...body, resource: photo } },
  );
}

export function delegationInput(subject: SubjectInput, scopes: string[]): DecisionInput {
  const body = {
    grantee_type: 'subject',
    grantee_subject_id: 'bob',
    resource_id: photo._id,
    scopes,
    expires_at: new Date(Date.now() + 86_400_000).toISOString(),
  };
  return decisionInput(
    { client: confidentialClient, subject, request: { endpoint: '/delegation', parameters: body } },
    { delegation: { operation: 'create', ...body, resource: photo } },
  );
}

export const bob: SubjectInput = { sub: 'bob', idp: 'corp' };
