/** Hosts an http redirect URI may name: the loopback interface (RFC 8252 §7.3, OAuth 2.1 §2.3.1). */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

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
