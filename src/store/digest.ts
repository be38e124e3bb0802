import { createCipheriv, createDecipheriv, hash, hkdfSync, randomBytes } from 'node:crypto';

/**
 * How a secret value (a token, a code, an upstream `state`) is kept when it must be looked up
 * again: only its SHA-256 digest is stored. The values are random and long, so an unkeyed
 * digest cannot be reversed, and a copy of the store hands out nothing usable.
 */
export function storageDigest(value: string): string {
  return hash('sha256', value, 'base64url');
}

/**
 * What a record must keep readable for whoever holds `secret` (a sign-in's `state`, stored only as
 * its digest) and for nobody else: `value` sealed with AES-256-GCM under a key derived from the
 * secret (HKDF), so that a copy of the store, even with SERVICE_SECRETS_KEY, opens none of it.
 */
export function sealedFor(secret: string, value: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFrom(secret), iv);
  const sealed = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url');
}

/** `sealedFor`'s value, or null when `sealed` was not sealed for `secret` (or was altered). */
export function openedWith(secret: string, sealed: string): string | null {
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length < 28) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyFrom(secret), bytes.subarray(0, 12));
    decipher.setAuthTag(bytes.subarray(12, 28));
    return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

function keyFrom(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, '', 'arbiter: sealed for the holder of a secret', 32));
}
