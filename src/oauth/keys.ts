import { randomBytes, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { ConflictError, DEFAULT_TENANT, type Sealer, type Store, type StoredDoc } from '../store/index.js';

export const PROVIDER_SECRETS_COLLECTION = { name: 'provider_secrets' };

export interface ProviderSecrets {
  /**
   * Private RS256 signing keys; oidc-provider publishes only their public members. It signs with
   * the first key it may sign with: a key whose `key_ops` is `["verify"]` is published (a next
   * key before its use, a retiring one while tokens it signed live) but never signs.
   */
  jwks: { keys: JWK[] };
  /** Keys that sign oidc-provider's cookies. */
  cookieKeys: string[];
  /** Where each signing key is in its rotation (by kid); absent in secrets written before rotation existed. */
  keyStates?: Record<string, KeyState>;
}

export interface KeyState {
  state: 'next' | 'active' | 'retiring';
  since: string;
  /** A retiring key is dropped by the first rotation after this time (the tokens it signed have expired). */
  retireAfter?: string;
}

/** The secrets, sealed (src/store/sealed.ts); `jwks`/`cookieKeys` in clear only in documents written before sealing. */
interface SecretsDoc extends StoredDoc, Partial<ProviderSecrets> {
  id: string;
  sealed?: string;
  createdAt: string;
  /** Moves on with every rotation, so that every node sees a change at its next look (watchProviderSecrets). */
  revision?: number;
}

const CURRENT = 'current';

const secretsOf = (store: Store) => store.collection<SecretsDoc>(PROVIDER_SECRETS_COLLECTION, DEFAULT_TENANT);

/**
 * Loads the provider's secrets, generating them on first start. They live in the store, sealed,
 * so that every node of a scale-out deployment signs with, and publishes, the same keys.
 */
export async function loadProviderSecrets(store: Store, sealer: Sealer): Promise<ProviderSecrets> {
  const existing = await secretsOf(store).get(CURRENT);
  if (existing) return openSecrets(existing, sealer);
  const generated = await generateSecrets();
  try {
    await secretsOf(store).insert({
      id: CURRENT,
      sealed: sealer.seal(JSON.stringify(generated)),
      createdAt: new Date().toISOString(),
      revision: 0,
    });
    return generated;
  } catch (error) {
    // Another node generated them first: use theirs.
    if (!(error instanceof ConflictError)) throw error;
    return loadProviderSecrets(store, sealer);
  }
}

function openSecrets(doc: SecretsDoc, sealer: Sealer): ProviderSecrets {
  if (doc.sealed) return JSON.parse(sealer.unseal(doc.sealed)) as ProviderSecrets;
  return { jwks: doc.jwks ?? { keys: [] }, cookieKeys: doc.cookieKeys ?? [] };
}

async function generateSecrets(): Promise<ProviderSecrets> {
  return { jwks: { keys: [await newSigningKey()] }, cookieKeys: [randomBytes(32).toString('base64url')] };
}

async function newSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
  return { ...(await exportJWK(privateKey)), kid: randomUUID(), use: 'sig', alg: 'RS256' };
}

/** What one rotation step did, for the operator. */
export type RotationStep = {
  action: 'published-next' | 'promoted-next';
  keys: { kid: string; state: KeyState['state']; retireAfter?: string }[];
  dropped: string[];
};

/**
 * One step of signing-key rotation with overlap (`arbiter rotate-signing-key`; run it twice, the
 * second time once relying parties have had time to fetch the JWKS, a day say):
 *
 * 1. without a next key: a new key is published as the next one (in the JWKS, `key_ops: ["verify"]`,
 *    not yet signing), so that relying parties that cache the JWKS know it before it is used;
 * 2. with one: the next key becomes the active one (it signs from now on) and the active one
 *    retires: still published, so that the tokens it signed verify, until `retireAfterSeconds`
 *    (the longest lifetime of anything signed) has passed.
 *
 * Either step first drops the retiring keys whose time has passed. The secrets' revision moves
 * on, and every node rebuilds its providers with the new keys at its next look.
 */
export async function rotateSigningKey(
  store: Store,
  sealer: Sealer,
  options: { retireAfterSeconds: number; now?: Date },
): Promise<RotationStep> {
  const now = options.now ?? new Date();
  const doc = await secretsOf(store).get(CURRENT);
  if (!doc) throw new Error('the store has no signing keys yet: start the server once first');
  const secrets = openSecrets(doc, sealer);
  const states = statesOf(secrets, doc.createdAt);
  const dropped = secrets.jwks.keys
    .filter((key) => {
      const state = states[key.kid as string];
      return state.state === 'retiring' && state.retireAfter !== undefined && Date.parse(state.retireAfter) <= +now;
    })
    .map((key) => key.kid as string);
  let keys = secrets.jwks.keys.filter((key) => !dropped.includes(key.kid as string));
  const next = keys.find((key) => states[key.kid as string].state === 'next');
  const since = now.toISOString();
  let action: RotationStep['action'];
  if (!next) {
    const added = await newSigningKey();
    keys = [...keys, { ...added, key_ops: ['verify'] }];
    states[added.kid as string] = { state: 'next', since };
    action = 'published-next';
  } else {
    const retireAfter = new Date(+now + options.retireAfterSeconds * 1000).toISOString();
    for (const key of keys)
      if (states[key.kid as string].state === 'active')
        states[key.kid as string] = { state: 'retiring', since, retireAfter };
    states[next.kid as string] = { state: 'active', since };
    const { key_ops: _published, ...promoted } = next;
    // The active key first: oidc-provider signs with the first key it may sign with.
    keys = [promoted, ...keys.filter((key) => key !== next).map((key) => ({ ...key, key_ops: ['verify'] }))];
    action = 'promoted-next';
  }
  const rotated: ProviderSecrets = {
    ...secrets,
    jwks: { keys },
    keyStates: Object.fromEntries(keys.map((key) => [key.kid as string, states[key.kid as string]])),
  };
  await secretsOf(store).update(CURRENT, {
    sealed: sealer.seal(JSON.stringify(rotated)),
    revision: (doc.revision ?? 0) + 1,
  });
  return {
    action,
    dropped,
    keys: keys.map((key) => ({ kid: key.kid as string, ...pick(rotated.keyStates![key.kid as string]) })),
  };
}

function pick({ state, retireAfter }: KeyState) {
  return { state, ...(retireAfter ? { retireAfter } : {}) };
}

/** The keys' states, those of secrets written before rotation existed included (their one key is active). */
function statesOf(secrets: ProviderSecrets, createdAt: string): Record<string, KeyState> {
  const states: Record<string, KeyState> = {};
  for (const key of secrets.jwks.keys)
    states[key.kid as string] = secrets.keyStates?.[key.kid as string] ?? { state: 'active', since: createdAt };
  return states;
}

/** Re-seals the secrets with the sealer's current key (`arbiter rotate-secrets-key`); false when there are none yet. */
export async function resealProviderSecrets(store: Store, sealer: Sealer): Promise<boolean> {
  const doc = await secretsOf(store).get(CURRENT);
  if (!doc) return false;
  await secretsOf(store).update(CURRENT, { sealed: sealer.seal(JSON.stringify(openSecrets(doc, sealer))) });
  return true;
}

/**
 * Looks at the secrets' revision every `intervalMs` and calls `changed` with the new secrets when
 * another process (`arbiter rotate-signing-key`, another node) rotated them. Returns a stop function.
 */
export function watchProviderSecrets(
  store: Store,
  sealer: Sealer,
  intervalMs: number,
  changed: (secrets: ProviderSecrets) => void,
  onError: (error: unknown) => void,
): () => void {
  let seen: number | undefined;
  let looking = false;
  const look = async () => {
    const doc = await secretsOf(store).get(CURRENT);
    if (!doc) return;
    const revision = doc.revision ?? 0;
    if (seen !== undefined && revision !== seen) changed(openSecrets(doc, sealer));
    seen = revision;
  };
  const timer = setInterval(() => {
    if (looking) return;
    looking = true;
    look()
      .catch(onError)
      .finally(() => (looking = false));
  }, intervalMs);
  timer.unref();
  void look().catch(onError);
  return () => clearInterval(timer);
}
