import { redirectUriProblem } from '../redirect-uri.js';

/**
 * Rules 2 and 3 (the document side): what a fetched client ID metadata document must say to
 * describe a public client. Only the fields Arbiter keeps are read; anything else is ignored.
 */
export interface ClientDocument {
  clientId: string;
  redirectUris: string[];
  clientName?: string;
  clientUri?: string;
  logoUri?: string;
}

export class InvalidDocumentError extends Error {
  constructor(reason: string) {
    super(`client metadata document refused: ${reason}`);
    this.name = 'InvalidDocumentError';
  }
}

const MAX_REDIRECT_URIS = 100;
const MAX_STRING = 2048;

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
    const parsed = typeof uri === 'string' && uri.length <= MAX_STRING && !uri.includes('#') ? URL.parse(uri) : null;
    if (!parsed) throw new InvalidDocumentError('redirect_uris must be absolute URIs without a fragment');
    // As at registration: a refused document is never stored, so it must not hold what /authorize refuses.
    const problem = redirectUriProblem(parsed);
    if (problem) throw new InvalidDocumentError(`redirect_uris ${problem}`);
  }
  return {
    clientId,
    redirectUris: redirectUris as string[],
    clientName: optionalString(document.client_name),
    clientUri: optionalHttpUri(document.client_uri),
    logoUri: optionalHttpUri(document.logo_uri),
  };
}

/** Display fields are kept when usable and dropped otherwise; they never decide anything. */
function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_STRING ? value : undefined;
}

function optionalHttpUri(value: unknown): string | undefined {
  const text = optionalString(value);
  if (!text) return undefined;
  try {
    const url = new URL(text);
    return url.protocol === 'https:' || url.protocol === 'http:' ? text : undefined;
  } catch {
    return undefined;
  }
}
