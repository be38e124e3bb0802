/**
 * Rule 6: how long a fetched document may be used, from its HTTP caching headers
 * (Cache-Control max-age / no-store / no-cache, else Expires), bounded.
 */

/** Used when the response says nothing about caching. */
export const DEFAULT_TTL_MS = 5 * 60_000;
/** No document is trusted longer than this, whatever it says (redirect URIs must be able to change). */
export const MAX_TTL_MS = 60 * 60_000;

/** Milliseconds the response may be reused (0: fetch again next time). */
export function freshnessMs(headers: Headers, now = Date.now()): number {
  const cacheControl = headers.get('cache-control');
  if (cacheControl !== null) {
    const directives = new Map(
      cacheControl
        .split(',')
        .map((part) => part.trim())
        .filter(Boolean)
        .map((part) => {
          const [name = '', ...value] = part.split('=');
          return [
            name.trim().toLowerCase(),
            value
              .join('=')
              .trim()
              .replace(/^"(.*)"$/, '$1'),
          ] as const;
        }),
    );
    if (directives.has('no-store') || directives.has('no-cache')) return 0;
    const maxAge = directives.get('max-age');
    if (maxAge !== undefined) return /^\d+$/.test(maxAge) ? bounded(Number(maxAge) * 1000) : 0;
  }
  const expires = headers.get('expires');
  if (expires !== null) {
    const at = Date.parse(expires);
    // An invalid Expires (e.g. "0") means already expired (RFC 9111 §5.3).
    if (Number.isNaN(at)) return 0;
    const date = Date.parse(headers.get('date') ?? '');
    return bounded(at - (Number.isNaN(date) ? now : date));
  }
  return DEFAULT_TTL_MS;
}

function bounded(ms: number): number {
  return Math.max(0, Math.min(ms, MAX_TTL_MS));
}
