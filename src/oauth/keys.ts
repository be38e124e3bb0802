import { randomBytes, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { ConflictError, DEFAULT_TENANT, type Sealer, type Store, type StoredDoc } from '../store/index.js';

export const PROVIDER_SECRETS_COLLECTION = { name: 'provider_secrets' };

export interface ProviderSecrets {
  /** Private RS256 signing keys; oidc-provider publishes only their public members. */
  jwks: { keys: JWK[] };
  /** Keys that sign oidc-provider's cookies. */
  cookieKeys: string[];
}

/** The secrets, sealed (src/store/sealed.ts); `jwks`/`cookieKeys` in clear only in documents written before sealing. */
interface SecretsDoc extends StoredDoc, Partial<ProviderSecrets> {
  id: string;
  sealed?: string;
  createdAt: string;
}

const CURRENT = 'current';

/**
 * Loads the provider's secrets, generating them on first start. They live in the store, sealed,
 * so that every node of a scale-out deployment signs with, and publishes, the same keys.
 */
export async function loadProviderSecrets(store: Store, sealer: Sealer): Promise<ProviderSecrets> {
  const secrets = store.collection<SecretsDoc>(PROVIDER_SECRETS_COLLECTION, DEFAULT_TENANT);
  const existing = await secrets.get(CURRENT);
  if (existing?.sealed) return JSON.parse(sealer.unseal(existing.sealed)) as ProviderSecrets;
  if (existing?.jwks && existing.cookieKeys) return { jwks: existing.jwks, cookieKeys: existing.cookieKeys };
  const generated = await generateSecrets();
  try {
    await secrets.insert({
      id: CURRENT,
      sealed: sealer.seal(JSON.stringify(generated)),
      createdAt: new Date().toISOString(),
    });
    return generated;
  } catch (error) {
    // Another node generated them first: use theirs.
    if (!(error instanceof ConflictError)) throw error;
    return loadProviderSecrets(store, sealer);
  }
}

async function generateSecrets(): Promise<ProviderSecrets> {
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: randomUUID(), use: 'sig', alg: 'RS256' };
  return { jwks: { keys: [signingKey] }, cookieKeys: [randomBytes(32).toString('base64url')] };
}
