import { importJWK, SignJWT, type CryptoKey, type JWK, type KeyObject } from 'jose';
import { storedTenantKeys } from '../oauth/index.js';
import type { Sealer, Store } from '../store/index.js';
import type { SubjectId } from './streams.js';

/** One event as the outbox keeps it: everything of its SET but the signature (made at delivery, with the keys then current). */
export interface PendingSet {
  tenant: string;
  streamId: string;
  jti: string;
  /** Epoch seconds of the change. */
  iat: number;
  iss: string;
  aud: string;
  subId: SubjectId;
  events: Record<string, Record<string, unknown>>;
}

/** The media type RFC 8417 §2.3 registers for a SET's `typ` header. */
export const SET_TYPE = 'secevent+jwt';

/**
 * The SET (RFC 8417) of a pending event, signed with the tenant's current signing key: the
 * key oidc-provider signs ID tokens with, published at the tenant's jwks_uri. The subject is the
 * top-level `sub_id` (SSF 1.0 §4.1.2); CAEP and RISC events carry their own members only.
 */
export async function signedSet(store: Store, sealer: Sealer, pending: PendingSet): Promise<string> {
  const key = await signingKey(store, sealer, pending.tenant);
  return new SignJWT({ sub_id: pending.subId, events: pending.events })
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: SET_TYPE })
    .setIssuer(pending.iss)
    .setAudience(pending.aud)
    .setIssuedAt(pending.iat)
    .setJti(pending.jti)
    .sign(key.key);
}

interface SigningKey {
  /** The revision of the tenant's keys it was read at (a rotation moves it on). */
  revision: number;
  kid: string;
  key: CryptoKey | KeyObject | Uint8Array;
}

/** Tenants whose imported signing key a store's node keeps (the least recently used goes first). */
const SIGNING_KEYS_KEPT = 256;

/**
 * Each store's tenants' imported signing keys: unsealing the secrets and importing the private
 * key cost ~0.4 ms of CPU, once per SET without them. Per store, as tests run several in a process.
 */
const signingKeys = new WeakMap<Store, Map<string, SigningKey>>();

/**
 * The tenant's signing key, imported again only when the revision of its keys (read without
 * unsealing them) has moved on since: a rotation signs the next SET with the new key.
 */
async function signingKey(store: Store, sealer: Sealer, tenant: string): Promise<SigningKey> {
  const keys = storedTenantKeys(store, sealer);
  let kept = signingKeys.get(store);
  if (!kept) signingKeys.set(store, (kept = new Map()));
  const cached = kept.get(tenant);
  if (cached && cached.revision === (await keys.revision(tenant))) {
    kept.delete(tenant);
    kept.set(tenant, cached);
    return cached;
  }
  const { secrets, revision } = await keys.load(tenant);
  // As oidc-provider: the first key that may sign (a `next` or `retiring` key is published for verification only).
  const jwk = secrets.jwks.keys.find((key: JWK) => !(key.key_ops?.length === 1 && key.key_ops[0] === 'verify'));
  if (!jwk?.kid) throw new Error(`tenant ${tenant} has no signing key`);
  const imported: SigningKey = { revision, kid: jwk.kid, key: await importJWK(jwk, 'RS256') };
  kept.delete(tenant);
  kept.set(tenant, imported);
  if (kept.size > SIGNING_KEYS_KEPT) kept.delete(kept.keys().next().value as string);
  return imported;
}
