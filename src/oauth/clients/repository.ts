import { randomBytes } from 'node:crypto';
import { definitionFor, type ClientRecord } from '../../catalog/index.js';
import { RecordRepository, type SecretHashing } from '../../records/index.js';
import type { Store } from '../../store/index.js';
import { hashClientSecret } from './secrets.js';

const SECRET_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A random secret of 32 characters from [A-Za-z0-9] (about 190 bits), without modulo bias. */
function generateClientSecret(): string {
  let secret = '';
  while (secret.length < 32) {
    for (const byte of randomBytes(48)) {
      if (byte < 248 && secret.length < 32) secret += SECRET_ALPHABET[byte % 62];
    }
  }
  return secret;
}

/** How client secrets are hashed and generated, for every writer of clients (the catalog's `hashedSecret`). */
export const CLIENT_SECRET_HASHING: SecretHashing = { hash: hashClientSecret, generate: generateClientSecret };

const CLIENTS = definitionFor('clients')!;

/** What the store and the repository add to a client's fields: never part of a body written through the repository. */
export const STORE_FIELDS = ['id', 'tenantId', 'createdAt', 'updatedAt', 'tokenEpoch', 'expiresAt'] as const;

/**
 * The tenant's clients, through the one repository of records (src/records): the Admin API, the
 * CLI, dynamic registration and client ID metadata documents all write them through it, validated
 * by the catalog's client schema.
 */
export function clientRepository(store: Store): RecordRepository<ClientRecord> {
  return new RecordRepository<ClientRecord>(store, CLIENTS, { secrets: CLIENT_SECRET_HASHING });
}
