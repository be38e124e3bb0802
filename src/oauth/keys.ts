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
  /**
   * Keys that sign oidc-provider's cookies, the tenant's own too: under X-Tenant-Id every tenant's
   * cookies share the host and path, and one tenant's session cookie must not even pass another's
   * signature check (its store lookup would find nothing anyway).
   */
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
  /** Moves on with every rotation, so that every node can tell rotated keys from those it holds (TenantProviders.refresh). */
  revision?: number;
}

/** Each tenant's secrets are the document `current` of its own `provider_secrets` (the default tenant's as before). */
const CURRENT = 'current';
/**
 * The default tenant's document `rotations`: a stamp that every rotation of any tenant's keys
 * changes, so that a node looks at one document, not at every tenant's, to learn of a rotation.
 */
const ROTATIONS = 'rotations';

const secretsOf = (store: Store, tenant: string) => store.collection<SecretsDoc>(PROVIDER_SECRETS_COLLECTION, tenant);

/** Where the rotation stamp is: a unique value each time, so that no two rotations look alike. */
const rotationsOf = (store: Store) =>
  store.collection<StoredDoc & { stamp: string }>(PROVIDER_SECRETS_COLLECTION, DEFAULT_TENANT);

/** A tenant's secrets as read, and the revision they were at (which a rotation moves on). */
export interface LoadedSecrets {
  secrets: ProviderSecrets;
  revision: number;
}

/**
 * Loads a tenant's secrets (store tenant name; the default tenant's unless told), generating
 * them on its first use. They live in the store, sealed, so that every node of a scale-out
 * deployment signs with, and publishes, the same keys; each tenant has its own, so that what one
 * tenant signs never verifies with another's JWKS (under X-Tenant-Id they share the issuer).
 */
export async function loadProviderSecrets(
  store: Store,
  sealer: Sealer,
  tenant: string = DEFAULT_TENANT,
): Promise<LoadedSecrets> {
  const existing = await secretsOf(store, tenant).get(CURRENT);
  if (existing) return { secrets: openSecrets(existing, sealer), revision: existing.revision ?? 0 };
  const generated = await generateSecrets();
  try {
    await secretsOf(store, tenant).insert({
      id: CURRENT,
      sealed: sealer.seal(JSON.stringify(generated)),
      createdAt: new Date().toISOString(),
      revision: 0,
    });
    return { secrets: generated, revision: 0 };
  } catch (error) {
    // Another node generated them first: use theirs.
    if (!(error instanceof ConflictError)) throw error;
    return loadProviderSecrets(store, sealer, tenant);
  }
}

/** Where a tenant's signing and cookie keys come from, for its providers (TenantProviders). */
export interface TenantKeys {
  /** The tenant's keys and their revision, made on its first use. */
  load(tenant: string): Promise<LoadedSecrets>;
  /** The revision of the tenant's keys in the store now (null: none), to tell whether they were rotated. */
  revision(tenant: string): Promise<number | null>;
}

/** Every tenant's keys, as the store keeps them. */
export function storedTenantKeys(store: Store, sealer: Sealer): TenantKeys {
  return {
    load: (tenant) => loadProviderSecrets(store, sealer, tenant),
    revision: async (tenant) => {
      const doc = await secretsOf(store, tenant).get(CURRENT);
      return doc ? (doc.revision ?? 0) : null;
    },
  };
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
  /** `next-waiting`: a next key is published already (promote it with `promote`); `no-next-key`: there is none to promote. */
  action: 'published-next' | 'promoted-next' | 'next-waiting' | 'no-next-key';
  keys: { kid: string; state: KeyState['state']; retireAfter?: string }[];
  dropped: string[];
};

/**
 * One step of signing-key rotation with overlap, of one tenant's keys (`arbiter rotate-signing-key
 * [--tenant t] [--promote]`):
 *
 * 1. without `promote`: a new key is published as the next one (in the JWKS, `key_ops: ["verify"]`,
 *    not yet signing), so that relying parties that cache the JWKS know it before it is used; with
 *    a next key published already, nothing changes (`next-waiting`);
 * 2. with `promote`, once relying parties have had time to fetch the JWKS (a day, say): the next
 *    key becomes the active one (it signs from now on) and the active one retires: still
 *    published, so that the tokens it signed verify, until `retireAfterSeconds` (the longest
 *    lifetime of anything signed) has passed. Without a next key, nothing changes (`no-next-key`).
 *
 * Promoting is asked for by name, so that running the command again (by mistake, or from every
 * node's schedule at once) never makes a key sign moments after it was published. Either step
 * first drops the retiring keys whose time has passed. The keys are written over the revision
 * they were read at: of two steps at once, one is made and the other refused. The revision moves
 * on, and every node rebuilds that tenant's providers with the new keys at its next look
 * (watchSigningKeyRotations). A tenant without keys yet gets them first.
 */
export async function rotateSigningKey(
  store: Store,
  sealer: Sealer,
  options: { retireAfterSeconds: number; now?: Date; tenant?: string; promote?: boolean },
): Promise<RotationStep> {
  const now = options.now ?? new Date();
  const tenant = options.tenant ?? DEFAULT_TENANT;
  await loadProviderSecrets(store, sealer, tenant);
  const doc = (await secretsOf(store, tenant).get(CURRENT))!;
  const secrets = openSecrets(doc, sealer);
  const states = statesOf(secrets, doc.createdAt);
  const stateOf = (key: JWK): KeyState => {
    const state = states[key.kid as string];
    if (!state) throw new Error(`signing key ${key.kid} has no rotation state`);
    return state;
  };
  const dropped = secrets.jwks.keys
    .filter((key) => {
      const state = stateOf(key);
      return state.state === 'retiring' && state.retireAfter !== undefined && Date.parse(state.retireAfter) <= +now;
    })
    .map((key) => key.kid as string);
  let keys = secrets.jwks.keys.filter((key) => !dropped.includes(key.kid as string));
  const next = keys.find((key) => stateOf(key).state === 'next');
  const since = now.toISOString();
  let action: RotationStep['action'];
  if (!next && !options.promote) {
    const added = await newSigningKey();
    keys = [...keys, { ...added, key_ops: ['verify'] }];
    states[added.kid as string] = { state: 'next', since };
    action = 'published-next';
  } else if (!next || !options.promote) {
    action = next ? 'next-waiting' : 'no-next-key';
  } else {
    const retireAfter = new Date(+now + options.retireAfterSeconds * 1000).toISOString();
    for (const key of keys)
      if (stateOf(key).state === 'active') states[key.kid as string] = { state: 'retiring', since, retireAfter };
    states[next.kid as string] = { state: 'active', since };
    const { key_ops: _published, ...promoted } = next;
    // The active key first: oidc-provider signs with the first key it may sign with.
    keys = [promoted, ...keys.filter((key) => key !== next).map((key) => ({ ...key, key_ops: ['verify'] }))];
    action = 'promoted-next';
  }
  const rotated: ProviderSecrets = {
    ...secrets,
    jwks: { keys },
    keyStates: Object.fromEntries(keys.map((key) => [key.kid as string, stateOf(key)])),
  };
  const step = { action, dropped, keys: keys.map((key) => ({ kid: key.kid as string, ...pick(stateOf(key)) })) };
  // Nothing to write: neither a key published or promoted, nor one dropped.
  if ((action === 'next-waiting' || action === 'no-next-key') && dropped.length === 0) return step;
  const written = await secretsOf(store, tenant).update(
    CURRENT,
    { sealed: sealer.seal(JSON.stringify(rotated)), revision: (doc.revision ?? 0) + 1 },
    { revision: doc.revision ?? null },
  );
  if (!written)
    throw new Error(
      `the keys of tenant ${tenant} changed while this step was made (another rotation at once): nothing was changed, run it again`,
    );
  // After the tenant's document: a node that sees the new stamp reads the new revision.
  await rotationsOf(store).upsert({ id: ROTATIONS, stamp: randomUUID(), tenant, at: since });
  return step;
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

/**
 * Re-seals a tenant's secrets with the sealer's current key (`arbiter rotate-secrets-key`); false
 * when it has none yet.
 */
export async function resealProviderSecrets(
  store: Store,
  sealer: Sealer,
  tenant: string = DEFAULT_TENANT,
): Promise<boolean> {
  const doc = await secretsOf(store, tenant).get(CURRENT);
  if (!doc) return false;
  await secretsOf(store, tenant).update(CURRENT, { sealed: sealer.seal(JSON.stringify(openSecrets(doc, sealer))) });
  return true;
}

/**
 * Looks at the rotation stamp every `intervalMs` and calls `rotated` when it changed (and once at
 * the first look, for a rotation made before it): some tenant's keys were rotated by `arbiter
 * rotate-signing-key` (another process, another node), and the caller finds out whose by their
 * revisions. A stamp is taken as seen only once `rotated` has succeeded. Returns a stop function.
 */
export function watchSigningKeyRotations(
  store: Store,
  intervalMs: number,
  rotated: () => Promise<void>,
  onError: (error: unknown) => void,
): () => void {
  let seen: string | null | undefined;
  let looking = false;
  const look = async () => {
    if (looking) return;
    looking = true;
    try {
      const stamp = (await rotationsOf(store).get(ROTATIONS))?.stamp ?? null;
      if (stamp === seen) return;
      await rotated();
      seen = stamp;
    } catch (error) {
      onError(error);
    } finally {
      looking = false;
    }
  };
  const timer = setInterval(() => void look(), intervalMs);
  timer.unref();
  // Where the store announces writes to every node (PostgreSQL's NOTIFY), a rotation is seen at once, not at the next look.
  store.watch?.([PROVIDER_SECRETS_COLLECTION.name], () => void look());
  void look();
  return () => clearInterval(timer);
}
