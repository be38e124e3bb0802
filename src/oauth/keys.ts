import { randomBytes, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { ConflictError, DEFAULT_TENANT, type Store, type StoredDoc } from '../store/index.js';

export const PROVIDER_SECRETS_COLLECTION = { name: 'provider_secrets' };

export interface ProviderSecrets {
  /** Private RS256 signing keys; oidc-provider publishes only their public members. */
  jwks: { keys: JWK[] };
  /** Keys that sign oidc-provider's cookies. */
  cookieKeys: string[];
}

interface SecretsDoc extends StoredDoc, ProviderSecrets {
  id: string;
  createdAt: string;
}

const CURRENT = 'current';

/**
 * Loads the provider's secrets, generating them on first start. They live in the store
 * so that every node of a scale-out deployment signs with, and publishes, the same keys.
 */
export async function loadProviderSecrets(store: Store): Promise<ProviderSecrets> {
  const secrets = store.collection<SecretsDoc>(PROVIDER_SECRETS_COLLECTION, DEFAULT_TENANT);
  const existing = await secrets.get(CURRENT);
  if (existing) return { jwks: existing.jwks, cookieKeys: existing.cookieKeys };
  const generated = await generateSecrets();
  try {
    await secrets.insert({ id: CURRENT, ...generated, createdAt: new Date().toISOString() });
    return generated;
  } catch (error) {
    // Another node generated them first: use theirs.
    if (!(error instanceof ConflictError)) throw error;
    return loadProviderSecrets(store);
  }
}

async function generateSecrets(): Promise<ProviderSecrets> {
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: randomUUID(), use: 'sig', alg: 'RS256' };
  return { jwks: { keys: [signingKey] }, cookieKeys: [randomBytes(32).toString('base64url')] };
}
