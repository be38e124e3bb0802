/**
 * Rule 1 of the client ID metadata document rules: which client_id values name a metadata
 * document, and which of those are acceptable URLs at all.
 */
import { MAX_CLIENT_ID_LENGTH } from '../../../catalog/index.js';

/** The only hosts plain http:// may name, and only with SERVICE_REGISTRATION_CIMD_ALLOW_INSECURE_LOCALHOST. */
const INSECURE_LOCAL_HOSTS = new Set(['localhost', '127.0.0.1']);

/** A client_id that is meant as a metadata document URL (acceptable or not). */
export function looksLikeDocumentUrl(clientId: string): boolean {
  return /^https?:\/\//i.test(clientId);
}

export interface DocumentUrl {
  url: URL;
  /** http://localhost or http://127.0.0.1 under the insecure-localhost flag: fetched with loopback allowed. */
  insecureLocal: boolean;
}

/**
 * The URL to fetch for `clientId`, or the reason it names no client: https (or, with the flag,
 * http to localhost/127.0.0.1), a path other than `/`, no fragment, no dot segments (also
 * percent-encoded), no credentials. Checked on the string as sent, since URL parsing would
 * silently remove dot segments and an empty fragment.
 */
export function documentUrl(clientId: string, allowInsecureLocalhost: boolean): DocumentUrl | { refused: string } {
  if (clientId.length > MAX_CLIENT_ID_LENGTH) return { refused: 'the URL is too long' };
  if (clientId.includes('#')) return { refused: 'the URL has a fragment' };
  if (/[\s\\]/.test(clientId) || /[^\x21-\x7e]/.test(clientId))
    return { refused: 'the URL has characters a URL may not hold' };
  const match = /^([a-z]+):\/\/([^/?#]*)([^?#]*)/i.exec(clientId);
  if (!match) return { refused: 'not an absolute URL' };
  const [, scheme = '', authority = '', path = ''] = match;
  if (authority.includes('@')) return { refused: 'the URL has credentials' };
  if (path === '' || path === '/') return { refused: 'the URL has no path' };
  const segments = path.split('/').map((segment) => segment.replace(/%2e/gi, '.'));
  if (segments.some((segment) => segment === '.' || segment === '..')) return { refused: 'the URL has a dot segment' };
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return { refused: 'not an absolute URL' };
  }
  if (url.username || url.password) return { refused: 'the URL has credentials' };
  const protocol = scheme.toLowerCase();
  if (protocol === 'https') return { url, insecureLocal: false };
  if (protocol === 'http' && allowInsecureLocalhost && INSECURE_LOCAL_HOSTS.has(url.hostname))
    return { url, insecureLocal: true };
  return {
    refused: allowInsecureLocalhost
      ? 'only https, or http to localhost or 127.0.0.1, is allowed'
      : 'only https is allowed',
  };
}
