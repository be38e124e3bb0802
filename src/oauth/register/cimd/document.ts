import { definitionFor, registrableRedirectUriProblem, schemaTakes, webUriProblem } from '../../../catalog/index.js';

/**
 * Rules 2 and 3 (the document side): what a fetched client ID metadata document must say to
 * describe a public client. Only the fields Arbiter keeps are read; anything else is ignored.
 * `dpop_bound_access_tokens`, which binds the client, must be a boolean when given (display
 * fields that do not fit are only dropped).
 */
export interface ClientDocument {
  clientId: string;
  redirectUris: string[];
  clientName?: string;
  clientUri?: string;
  logoUri?: string;
  /** RFC 9449 §5.2: the client always uses DPoP (a token request without a proof is refused). */
  dpopBoundAccessTokens?: true;
}

export class InvalidDocumentError extends Error {
  constructor(reason: string) {
    super(`client metadata document refused: ${reason}`);
    this.name = 'InvalidDocumentError';
  }
}

const MAX_REDIRECT_URIS = 100;

/** The document's client fields, or InvalidDocumentError saying which rule it breaks. */
export function parseClientDocument(body: unknown, clientId: string): ClientDocument {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new InvalidDocumentError('not a JSON object');
  const document = body as Record<string, unknown>;
  if (document.client_id !== clientId)
    throw new InvalidDocumentError('its client_id is not the URL it was fetched from');
  const method = document.token_endpoint_auth_method;
  if (method !== undefined && method !== 'none')
    throw new InvalidDocumentError('only public clients (token_endpoint_auth_method none) are supported');
  if (document.client_secret !== undefined || document.client_secret_expires_at !== undefined)
    throw new InvalidDocumentError('a metadata document may not carry a client secret');
  const redirectUris = document.redirect_uris;
  if (!Array.isArray(redirectUris) || redirectUris.length === 0 || redirectUris.length > MAX_REDIRECT_URIS)
    throw new InvalidDocumentError(`redirect_uris must list 1 to ${MAX_REDIRECT_URIS} URIs`);
  for (const uri of redirectUris) {
    // As at registration and in the Admin API: a refused document is never stored, so it must not hold what /authorize refuses.
    const problem = typeof uri === 'string' ? registrableRedirectUriProblem(uri) : 'must be absolute URIs';
    if (problem) throw new InvalidDocumentError(`redirect_uris ${problem}`);
  }
  const dpopBound = document.dpop_bound_access_tokens;
  if (dpopBound !== undefined && typeof dpopBound !== 'boolean')
    throw new InvalidDocumentError('dpop_bound_access_tokens must be a boolean');
  return {
    clientId,
    redirectUris: redirectUris as string[],
    ...(dpopBound ? { dpopBoundAccessTokens: true as const } : {}),
    clientName: displayField('clientName', document.client_name),
    clientUri: displayField('clientUri', document.client_uri),
    logoUri: displayField('logoUri', document.logo_uri),
  };
}

const CLIENTS = definitionFor('clients')!;

/**
 * Display fields are kept when the catalog's client schema and its URI rules take them (the client
 * repository holds the record to both), and dropped otherwise: they never decide anything.
 */
function displayField(field: 'clientName' | 'clientUri' | 'logoUri', value: unknown): string | undefined {
  if (typeof value !== 'string' || value === '' || !schemaTakes(CLIENTS, field, value)) return undefined;
  return field === 'clientName' || webUriProblem(value, 'page') === null ? value : undefined;
}
