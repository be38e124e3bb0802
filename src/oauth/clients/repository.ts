import { definitionFor, type ClientRecord } from '../../catalog/index.js';
import { RecordRepository, type SecretHashing } from '../../records/index.js';
import type { Sealer, Store } from '../../store/index.js';
import { generateClientSecret, generatedSecretDigest, hashClientSecret, isKeptClientSecret } from './secrets.js';

/** How client secrets are hashed and generated, for every writer of clients (the catalog's `hashedSecret`). */
export function clientSecretHashing(sealer: Sealer): SecretHashing {
  return {
    hash: hashClientSecret,
    generate: generateClientSecret,
    digestGenerated: (secret) => generatedSecretDigest(sealer, secret),
    isKept: isKeptClientSecret,
  };
}

const CLIENTS = definitionFor('clients')!;

/** What the store and the repository add to a client's fields: never part of a body written through the repository. */
export const STORE_FIELDS = [
  'id',
  'tenantId',
  'createdAt',
  'updatedAt',
  'tokenEpoch',
  'secretGrace',
  'expiresAt',
] as const;

/**
 * The tenant's clients, through the one repository of records (src/records): the Admin API, the
 * CLI, dynamic registration and client ID metadata documents all write them through it, validated
 * by the catalog's client schema.
 */
export function clientRepository(store: Store, sealer: Sealer): RecordRepository<ClientRecord> {
  return new RecordRepository<ClientRecord>(store, CLIENTS, { secrets: clientSecretHashing(sealer) });
}
