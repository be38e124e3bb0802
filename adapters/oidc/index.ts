import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { Store, StoredDoc, TenantCollection } from '../../src/store/types.js';

/** One stored oidc-provider artefact (token, code, session, interaction, …). */
interface OidcDoc extends StoredDoc {
  id: string;
  model: string;
  payload: AdapterPayload;
  grantId: string | null;
  uid: string | null;
  userCode: string | null;
  expiresAt: number | null;
  consumedAt?: number | null;
}

export const OIDC_COLLECTION = {
  name: 'oidc',
  indexes: ['grantId', 'uid', 'userCode'],
};

/** Models that oidc-provider asks for which live in other collections (e.g. clients from the Admin API). */
export type ModelOverride = (id: string) => Promise<AdapterPayload | undefined>;

/**
 * Builds the oidc-provider Adapter class for one tenant. All models share one
 * collection so that revoking a grant removes its codes and tokens in one call.
 */
export function createOidcAdapter(store: Store, tenant: string, overrides: Record<string, ModelOverride> = {}) {
  const artefacts: TenantCollection<OidcDoc> = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);

  return class StoreAdapter implements Adapter {
    constructor(private readonly model: string) {}

    private key(id: string): string {
      return `${this.model}:${id}`;
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      await artefacts.upsert({
        id: this.key(id),
        model: this.model,
        payload,
        grantId: payload.grantId ?? null,
        uid: payload.uid ?? null,
        userCode: payload.userCode ?? null,
        expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : null,
      });
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const override = overrides[this.model];
      if (override) return override(id);
      return (await artefacts.get(this.key(id)))?.payload;
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      return (await artefacts.findOne({ model: this.model, userCode }))?.payload;
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      return (await artefacts.findOne({ model: this.model, uid }))?.payload;
    }

    /** Atomic, so that a code or refresh token is consumed by exactly one of two racing requests. */
    async consume(id: string): Promise<void> {
      const current = await artefacts.get(this.key(id));
      if (!current || current.consumedAt) return;
      const consumedAt = Math.floor(Date.now() / 1000);
      await artefacts.update(this.key(id), { consumedAt, payload: { ...current.payload, consumed: consumedAt } }, { consumedAt: null });
    }

    async destroy(id: string): Promise<void> {
      await artefacts.delete(this.key(id));
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await artefacts.deleteMany({ grantId });
    }
  };
}
