import { hash } from 'node:crypto';

/**
 * How a secret value (a token, a code, an upstream `state`) is kept when it must be looked up
 * again: only its SHA-256 digest is stored. The values are random and long, so an unkeyed
 * digest cannot be reversed, and a copy of the store hands out nothing usable.
 */
export function storageDigest(value: string): string {
  return hash('sha256', value, 'base64url');
}
