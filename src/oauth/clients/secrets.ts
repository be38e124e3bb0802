import { createHmac, createSecretKey, randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/bcrypt';
import { LRUCache } from 'lru-cache';
import type Provider from 'oidc-provider';
import { compareClientSecretsWith } from '../internals.js';

/** The BCrypt cost of the secrets Arbiter hashes itself (dynamic registration). */
export const SECRET_HASH_COST = 10;

/**
 * Client secrets are kept as BCrypt hashes (Admin API and registration alike). BCrypt is slow on
 * purpose (a cost-10 check takes about 50 ms of CPU), which is right at rest and wrong on every
 * request: a client calling /token a hundred times a second would need five cores for it. So:
 *
 * - the check runs in libuv's thread pool (@node-rs/bcrypt), never on the event loop;
 * - a *successful* check is remembered for a short while, under an HMAC of the client id, the
 *   stored hash and the presented secret with a key that lives only in this process's memory.
 *   Nothing in the cache can be turned back into a secret or used on another node; a changed
 *   secret (another stored hash) or a wrong one never matches an entry; a disabled or deleted
 *   client is refused by its lookup before its secret is compared. Failures are never cached.
 */
export class SecretVerifier {
  /** A KeyObject, not the bytes: Node prepares a Buffer key anew for every HMAC (about 10 µs on Node 24). */
  private readonly key = createSecretKey(randomBytes(32));
  private readonly verified: LRUCache<string, true>;
  /** Checks under way: simultaneous requests with the same secret share one BCrypt run. */
  private readonly pending = new Map<string, Promise<boolean>>();

  constructor(options: { max?: number; ttlMs?: number } = {}) {
    this.verified = new LRUCache({ max: options.max ?? 10_000, ttl: options.ttlMs ?? 5 * 60_000 });
  }

  async verify(clientId: string, presented: string, storedHash: string): Promise<boolean> {
    const id = createHmac('sha256', this.key)
      .update(clientId)
      .update('\0')
      .update(storedHash)
      .update('\0')
      .update(presented)
      .digest('base64url');
    if (this.verified.has(id)) return true;
    let check = this.pending.get(id);
    if (!check) {
      check = verify(presented, storedHash)
        .catch(() => false)
        .then((valid) => {
          if (valid) this.verified.set(id, true);
          return valid;
        })
        .finally(() => this.pending.delete(id));
      this.pending.set(id, check);
    }
    return check;
  }
}

/** One verifier for the process: /token (every tenant's provider) and the APIs taking client credentials. */
export const clientSecrets = new SecretVerifier();

/** A new secret's BCrypt hash, computed in the thread pool. */
export function hashClientSecret(secret: string): Promise<string> {
  return hash(secret, { cost: SECRET_HASH_COST });
}

/** oidc-provider compares plain strings; Arbiter's clients hold hashes (internals.ts, item 3). */
export function compareHashedClientSecrets(provider: Provider): void {
  compareClientSecretsWith(provider, (clientId, presented, stored) =>
    clientSecrets.verify(clientId, presented, stored),
  );
}
