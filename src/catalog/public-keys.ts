import { createPublicKey } from 'node:crypto';

/** The most keys a client's inline JWK Set may hold. */
const MAX_KEYS = 20;
/** JWK members that only a private or symmetric key has. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/**
 * Why `keys` (a client's inline JWK Set, `jwks.keys`) cannot be registered, or null: public keys
 * only, each one Node can import (a key it cannot would make the client unusable). The one check
 * of dynamic registration and of the Admin API: a private key given to either would be kept,
 * and shown back, as client metadata.
 */
export function publicKeySetProblem(keys: readonly unknown[]): string | null {
  if (keys.length > MAX_KEYS) return `must not hold more than ${MAX_KEYS} keys`;
  for (const key of keys) {
    if (typeof key !== 'object' || key === null || typeof (key as { kty?: unknown }).kty !== 'string')
      return 'keys must be JWK objects';
    const members = key as Record<string, unknown>;
    if (PRIVATE_MEMBERS.some((member) => Object.hasOwn(members, member)))
      return 'must hold public keys only (no private or symmetric key members)';
    for (const member of ['kid', 'alg', 'use'] as const) {
      const value = members[member];
      if (value !== undefined && (typeof value !== 'string' || value.length > 256))
        return `key member ${member} must be a string`;
    }
    try {
      createPublicKey({ key: members as never, format: 'jwk' });
    } catch {
      return 'holds a key that is not a valid public JWK';
    }
  }
  return null;
}
