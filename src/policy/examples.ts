/**
 * A policy input to start from: the `token` point for a client_credentials request, as
 * docs/policy.md describes it (`tenant` and `time` left for the caller to fill in). The Admin
 * API's OpenAPI example and the console's playground both show it. Data only: the console's
 * browser bundle imports it.
 */
export const CLIENT_CREDENTIALS_TOKEN_INPUT = {
  client: { client_id: 'documents-app', client_type: 'confidential', registration_type: 'admin', scopes: ['read'], granted_resources: [], authenticated_with: 'client_secret_basic' },
  subject: null,
  request: {
    endpoint: '/token',
    method: 'POST',
    parameters: { grant_type: 'client_credentials', scope: 'read' },
    grant_type: 'client_credentials',
    scopes: ['read'],
    resource: null,
    resolved_resource_type: null,
    resource_types: [],
    authorization_details: [],
  },
};
