/** Hosts an http redirect URI may name: the loopback interface (RFC 8252 §7.3, OAuth 2.1 §2.3.1). */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);
/** The longest URI a client may register. */
const MAX_URI_LENGTH = 2048;
/** What an absolute URI may contain as written (RFC 3986 characters, no whitespace or controls). */
const URI_CHARS = /^[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;
/**
 * A URI that names its host as written (`scheme://host…`). The URL parser reads `https:///cb` and
 * `https:cb` as the host `cb`; found 2026-11-30, such a redirect URI was registered as written,
 * and a browser would have taken the code to `https://cb/`.
 */
const WRITTEN_AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]/;

/**
 * Why a redirect URI a caller registers is unacceptable under OAuth 2.1 §2.3.1 and RFC 9700
 * §4.1.3, or null when it is fine: https, or http on the loopback interface only; a host is
 * named literally (no wildcard), and no credentials ride in it. (Fragments are each caller's
 * own check.)
 */
export function redirectUriProblem(parsed: URL): string | null {
  // Web clients: oidc-provider redirects only to http(s) URIs.
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must be http or https URIs';
  if (parsed.username || parsed.password) return 'must not contain credentials (user:password@)';
  if (parsed.hostname.includes('*') || parsed.href.includes('*')) return 'must not contain a wildcard';
  if (parsed.protocol === 'http:' && !LOOPBACK_HOSTS.has(parsed.hostname))
    return 'must use https, except on the loopback interface (127.0.0.1, [::1], localhost)';
  return null;
}

/**
 * Why `uri`, as written, cannot be registered as a redirect URI, or null: the whole check of
 * dynamic registration (and of the Admin API, which must not store what registration refuses),
 * an absolute URI without a fragment on top of redirectUriProblem's rules.
 */
export function registrableRedirectUriProblem(uri: string): string | null {
  if (!isWrittenAsUri(uri)) return 'must be absolute URIs';
  if (uri.includes('#')) return 'must not contain a fragment';
  const parsed = URL.parse(uri);
  if (!parsed) return 'must be absolute URIs';
  return redirectUriProblem(parsed) ?? (parsed.hostname && WRITTEN_AUTHORITY.test(uri) ? null : 'must name a host');
}

/**
 * Why `uri` cannot be registered as one of a client's web pages (`page`: client_uri, logo_uri,
 * tos_uri, policy_uri; http or https), as its JWK Set (`jwks`: jwks_uri; https, no fragment), or
 * as where Arbiter posts to it (`notification`: backchannel_logout_uri; http or https, no fragment,
 * OIDC Back-Channel Logout §2.2), or null. What Arbiter posts to goes through the outbound guard.
 */
export function webUriProblem(uri: string, kind: 'page' | 'jwks' | 'notification'): string | null {
  const parsed = isWrittenAsUri(uri) ? URL.parse(uri) : null;
  if (!parsed?.hostname || !WRITTEN_AUTHORITY.test(uri)) return 'must be an absolute URI';
  if (kind === 'jwks' && parsed.protocol !== 'https:') return 'must be an https URI';
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must be an http or https URI';
  if (kind !== 'page' && uri.includes('#')) return 'must not contain a fragment';
  return null;
}

/** An absolute URI of bounded length, written in RFC 3986 characters only. */
function isWrittenAsUri(uri: string): boolean {
  return uri.length <= MAX_URI_LENGTH && URI_CHARS.test(uri);
}
