import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { ConflictError, DEFAULT_TENANT, type Store, type StoredDoc } from './types.js';

const PREFIX = 'sealed:v1:';
/** AES-GCM's nonce and authentication tag, as seal() writes them. */
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const SEALING_KEYS_COLLECTION = { name: 'sealing_keys' };
const DEVELOPMENT_KEY_ID = 'development';
const DIGEST_KEY_ID = 'keyed-digest';

/**
 * Secrets Arbiter must be able to read back (an upstream identity provider's client secret, its
 * own signing keys) are kept sealed: AES-256-GCM with a key from SERVICE_SECRETS_KEY, which lives
 * outside the store, so a copy of the store reveals none of them. Without that key (development
 * only) a generated key kept in the store is used, which protects nothing and says so at start-up.
 */
export class Sealer {
  private constructor(
    /**
     * The first key seals; every key may open (a development key stays readable once a real one is set).
     * There is one at least: SERVICE_SECRETS_KEY, or else the store's development key.
     */
    private readonly keys: Buffer[],
    /** False when the only key is the store's own development key. */
    readonly protective: boolean,
  ) {}

  /** The key of `keyedDigest`, opened by `open()`: one per store, apart from the sealing keys. */
  private digestKey: KeyObject | null = null;

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
    const sealer = new Sealer(keys, configuredKey !== null);
    sealer.digestKey = createSecretKey(await sealer.digestKeyOf(store));
    return sealer;
  }

  /**
   * HMAC-SHA-256 of `value` (base64url) under a random key of the store's, kept sealed in it: a
   * copy of the store cannot check a guess against a digest without SERVICE_SECRETS_KEY. The key
   * is its own, not the sealing key nor derived from it, so that changing SERVICE_SECRETS_KEY
   * seals it again (`open()` with the new key) and every digest made under it stays valid.
   */
  keyedDigest(value: string): string {
    return createHmac('sha256', this.digestKey!).update(value).digest('base64url');
  }

  seal(plain: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keys[0]!, iv);
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${PREFIX}${[iv, cipher.getAuthTag(), sealed].map((part) => part.toString('base64url')).join('.')}`;
  }

  /** `value` sealed again with the current key (a value sealed with an older key, or not sealed yet). */
  reseal(value: string): string {
    return this.seal(this.unseal(value));
  }

  /**
   * The key of `keyedDigest`: made once per store (by the first node to need it), sealed; sealed
   * again when this node's current key is another (a new SERVICE_SECRETS_KEY), so that
   * `arbiter rotate-secrets-key` (which opens a Sealer with the new key) leaves it under the new one.
   */
  private async digestKeyOf(store: Store): Promise<Buffer> {
    const keys = store.collection<StoredDoc & { sealed: string }>(SEALING_KEYS_COLLECTION, DEFAULT_TENANT);
    const existing = await keys.get(DIGEST_KEY_ID);
    if (!existing) {
      try {
        await keys.insert({ id: DIGEST_KEY_ID, sealed: this.seal(randomBytes(KEY_BYTES).toString('base64url')) });
      } catch (error) {
        if (!(error instanceof ConflictError)) throw error;
      }
      return this.digestKeyOf(store);
    }
    const { plain, current } = this.opened(existing.sealed);
    if (!current) await keys.update(DIGEST_KEY_ID, { sealed: this.seal(plain) }, { sealed: existing.sealed });
    return Buffer.from(plain, 'base64url');
  }

  /** The plain value; a value that is not sealed (written before sealing existed) is returned as it is. */
  unseal(value: string): string {
    return this.opened(value).plain;
  }

  /** The plain value, and whether it was sealed with the current key. */
  private opened(value: string): { plain: string; current: boolean } {
    if (!value.startsWith(PREFIX)) return { plain: value, current: false };
    const [iv, tag, sealed] = value
      .slice(PREFIX.length)
      .split('.')
      .map((part) => Buffer.from(part, 'base64url'));
    // A value of fewer parts opens with no key, nor one with a nonce or tag of another length than
    // seal() writes: found 2026-11-30, a tag cut to 4 bytes was taken (GCM checks what it is given),
    // leaving 32 bits between a forger with write access to the store and a sealed value.
    if (iv?.length === IV_BYTES && tag?.length === TAG_BYTES && sealed)
      for (const key of this.keys) {
        try {
          const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
          decipher.setAuthTag(tag);
          const plain = Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
          return { plain, current: key === this.keys[0] };
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
