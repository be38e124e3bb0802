import { errors, type Adapter, type AdapterPayload } from 'oidc-provider';
import { storageDigest } from '../../src/store/digest.js';
import type { Store, StoredDoc, TenantCollection } from '../../src/store/types.js';

/**
 * One stored oidc-provider artefact (token, code, session, interaction, …).
 *
 * oidc-provider names an artefact by its value: the id of an access token, refresh token,
 * authorization code or registration access token IS the bearer secret, and so is a session's
 * id (the session cookie). None of them is stored: `id` holds `<model>:<SHA-256 of the value>`,
 * and the payload is kept without `jti` (the value again), which `find` puts back from the
 * value it is asked for. A copy of the database therefore holds no usable token. The values
 * are random (≥ 126 bits), so a plain, unkeyed digest cannot be reversed; a key would have to
 * live outside the store to add anything, and the store is all Arbiter has.
 */
interface OidcDoc extends StoredDoc {
  id: string;
  model: string;
  payload: AdapterPayload;
  grantId: string | null;
  uid: string | null;
  userCode: string | null;
  expiresAt: number | null;
  consumedAt?: number | null;
  /** How `id` was derived from the value; absent on artefacts written before values were hashed. */
  idDigest?: 'sha256';
  /** The payload carried `jti` (= the value), which `find` restores. */
  hadJti?: boolean;
}

export const OIDC_COLLECTION = {
  name: 'oidc',
  indexes: ['grantId', 'uid', 'userCode'],
};

/** Models that oidc-provider asks for which live in other collections (e.g. clients from the Admin API). */
export type ModelOverride = (id: string) => Promise<AdapterPayload | undefined>;

/**
 * Models this adapter cannot serve without storing their values. oidc-provider saves the
 * DeviceCode it finds by user code (findByUserCode is not given the device code), so that
 * value would have to be kept. The device flow is not enabled in Arbiter; enabling it needs
 * a decision on how device codes are kept, not a silent plaintext copy.
 */
const UNSUPPORTED_MODELS = new Set(['DeviceCode']);

/** The key an artefact is stored under: the model and a digest of its value, never the value. */
export function artefactKey(model: string, value: string): string {
  return `${model}:${storageDigest(value)}`;
}

/**
 * Builds the oidc-provider Adapter class for one tenant. All models share one
 * collection so that revoking a grant removes its codes and tokens in one call.
 */
export function createOidcAdapter(store: Store, tenant: string, overrides: Record<string, ModelOverride> = {}) {
  const artefacts: TenantCollection<OidcDoc> = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);
  const migrated = () => hashLegacyArtefacts(store, tenant, artefacts);

  return class StoreAdapter implements Adapter {
    constructor(private readonly model: string) {
      if (UNSUPPORTED_MODELS.has(model))
        throw new Error(
          `the store adapter does not support oidc-provider's ${model} model (it would have to store the value in clear)`,
        );
    }

    private key(id: string): string {
      return artefactKey(this.model, id);
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      await migrated();
      await artefacts.upsert(
        storedDoc(this.model, this.key(id), payload, expiresIn ? Date.now() + expiresIn * 1000 : null),
      );
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const override = overrides[this.model];
      if (override) return override(id);
      await migrated();
      const doc = await artefacts.get(this.key(id));
      return doc ? restoredPayload(doc, id) : undefined;
    }

    /** The payload comes without `jti`: DeviceCode, the one model that would need it, is not supported. */
    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      await migrated();
      return (await artefacts.findOne({ model: this.model, userCode }))?.payload;
    }

    /**
     * Sessions are found by uid without their id (the session cookie, which is not stored), so
     * the payload comes without `jti`. oidc-provider only reads such a session (its account and
     * grants, to check an interaction or a session-bound token); it never saves or destroys it.
     */
    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      await migrated();
      return (await artefacts.findOne({ model: this.model, uid }))?.payload;
    }

    /**
     * Atomic, so that a code or refresh token is consumed by exactly one of racing requests: the
     * store's conditional update lets one through, and every other request is refused here
     * (oidc-provider checks `consumed` before it calls consume, so without this a request that
     * read the artefact before the winner wrote would go on to issue tokens too).
     */
    async consume(id: string): Promise<void> {
      await migrated();
      const key = this.key(id);
      const current = await artefacts.get(key);
      const consumedAt = Math.floor(Date.now() / 1000);
      const won =
        current && !current.consumedAt
          ? await artefacts.update(
              key,
              { consumedAt, payload: { ...current.payload, consumed: consumedAt } },
              { consumedAt: null },
            )
          : null;
      if (!won) throw new errors.InvalidGrant('the code or refresh token was already used');
    }

    async destroy(id: string): Promise<void> {
      await migrated();
      await artefacts.delete(this.key(id));
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await migrated();
      await artefacts.deleteMany({ grantId });
    }
  };
}

/** The document for an artefact: keyed by digest, its payload without anything that holds a bearer value. */
function storedDoc(
  model: string,
  key: string,
  payload: AdapterPayload,
  expiresAt: number | null,
  consumedAt?: number | null,
): OidcDoc {
  // oidc-provider's `jti` is the id it stores the artefact under, i.e. the value.
  const { jti, ...kept } = payload;
  // An interaction remembers the browser's session id (the session cookie); oidc-provider never reads it back.
  if (model === 'Interaction' && kept.session && typeof kept.session === 'object') {
    const { cookie: _cookie, ...session } = kept.session as Record<string, unknown>;
    kept.session = session as AdapterPayload['session'];
  }
  // Clients are read from Arbiter's client collection (an override), never from here: a client
  // saved by registration keeps no secret in this copy.
  if (model === 'Client') delete kept.client_secret;
  return {
    id: key,
    model,
    payload: kept,
    grantId: kept.grantId ?? null,
    uid: kept.uid ?? null,
    userCode: kept.userCode ?? null,
    expiresAt,
    ...(consumedAt !== undefined && { consumedAt }),
    idDigest: 'sha256',
    hadJti: jti !== undefined,
  };
}

function restoredPayload(doc: OidcDoc, value: string): AdapterPayload {
  return doc.hadJti ? { ...doc.payload, jti: value } : doc.payload;
}

const LEGACY_BATCH = 200;
const legacyHashed = new WeakMap<Store, Map<string, Promise<void>>>();

/**
 * Artefacts stored before values were hashed are keyed `<model>:<value>` and carry `jti`:
 * the first use of a tenant's adapter in this process rewrites them under their digest, so
 * live sessions and tokens keep working across the upgrade and no value stays readable.
 * A failed attempt is forgotten, so the next use tries again.
 */
function hashLegacyArtefacts(store: Store, tenant: string, artefacts: TenantCollection<OidcDoc>): Promise<void> {
  let perTenant = legacyHashed.get(store);
  if (!perTenant) legacyHashed.set(store, (perTenant = new Map()));
  const known = perTenant.get(tenant);
  if (known) return known;
  const attempt = (async () => {
    for (;;) {
      const legacy = await artefacts.find({ idDigest: null }, { limit: LEGACY_BATCH });
      if (legacy.length === 0) return;
      for (const doc of legacy) {
        const value = doc.id.slice(doc.model.length + 1);
        await artefacts.upsert(
          storedDoc(doc.model, artefactKey(doc.model, value), doc.payload, doc.expiresAt, doc.consumedAt),
        );
        await artefacts.delete(doc.id);
      }
    }
  })();
  perTenant.set(tenant, attempt);
  attempt.catch(() => {
    if (perTenant.get(tenant) === attempt) perTenant.delete(tenant);
  });
  return attempt;
}
