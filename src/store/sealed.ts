import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ConflictError, DEFAULT_TENANT, type Store, type StoredDoc } from './types.js';

const PREFIX = 'sealed:v1:';
const KEY_BYTES = 32;
const SEALING_KEYS_COLLECTION = { name: 'sealing_keys' };
const DEVELOPMENT_KEY_ID = 'development';

/**
 * Secrets Arbiter must be able to read back (an upstream identity provider's client secret, its
 * own signing keys) are kept sealed: AES-256-GCM with a key from SERVICE_SECRETS_KEY, which lives
 * outside the store, so a copy of the store reveals none of them. Without that key (development
 * only) a generated key kept in the store is used, which protects nothing and says so at start-up.
 */
export class Sealer {
  private constructor(
    /** The first key seals; every key may open (a development key stays readable once a real one is set). */
    private readonly keys: Buffer[],
    /** False when the only key is the store's own development key. */
    readonly protective: boolean,
  ) {}

  /**
   * `previousKey` (SERVICE_SECRETS_KEY_PREVIOUS) opens what was sealed before the key was changed,
   * until `arbiter rotate-secrets-key` has sealed everything again with `configuredKey`.
   */
  static async open(store: Store, configuredKey: string | null, previousKey: string | null = null): Promise<Sealer> {
    const development = await developmentKey(store, configuredKey === null);
    const keys = [
      ...(configuredKey ? [Buffer.from(configuredKey, 'base64url')] : []),
      ...(previousKey ? [Buffer.from(previousKey, 'base64url')] : []),
      ...(development ? [development] : []),
    ];
    return new Sealer(keys, configuredKey !== null);
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys[0], iv);
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${PREFIX}${[iv, cipher.getAuthTag(), sealed].map((part) => part.toString('base64url')).join('.')}`;
  }

  /** `value` sealed again with the current key (a value sealed with an older key, or not sealed yet). */
  reseal(value: string): string {
    return this.seal(this.unseal(value));
  }

  /** The plain value; a value that is not sealed (written before sealing existed) is returned as it is. */
  unseal(value: string): string {
    if (!value.startsWith(PREFIX)) return value;
    const [iv, tag, sealed] = value
      .slice(PREFIX.length)
      .split('.')
      .map((part) => Buffer.from(part, 'base64url'));
    for (const key of this.keys) {
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, iv);
        decipher.setAuthTag(tag);
        return Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
      } catch {
        // Sealed with another key: try the next.
      }
    }
    throw new Error('a sealed secret cannot be opened with SERVICE_SECRETS_KEY (was it sealed with another key?)');
  }
}

/** The store's development key: created when needed (no configured key), read when it exists. */
async function developmentKey(store: Store, create: boolean): Promise<Buffer | null> {
  const keys = store.collection<StoredDoc & { key: string }>(SEALING_KEYS_COLLECTION, DEFAULT_TENANT);
  const existing = await keys.get(DEVELOPMENT_KEY_ID);
  if (existing) return Buffer.from(existing.key, 'base64url');
  if (!create) return null;
  try {
    await keys.insert({ id: DEVELOPMENT_KEY_ID, key: randomBytes(KEY_BYTES).toString('base64url') });
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
  }
  return developmentKey(store, false);
}

export { SEALING_KEYS_COLLECTION };
