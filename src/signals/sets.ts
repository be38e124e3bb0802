import { importJWK, SignJWT, type JWK } from 'jose';
import { loadProviderSecrets } from '../oauth/index.js';
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
    .sign(await importJWK(key.jwk, 'RS256'));
}

async function signingKey(store: Store, sealer: Sealer, tenant: string): Promise<{ jwk: JWK; kid: string }> {
  const { secrets } = await loadProviderSecrets(store, sealer, tenant);
  // As oidc-provider: the first key that may sign (a `next` or `retiring` key is published for verification only).
  const jwk = secrets.jwks.keys.find((key) => !(key.key_ops?.length === 1 && key.key_ops[0] === 'verify'));
  if (!jwk?.kid) throw new Error(`tenant ${tenant} has no signing key`);
  return { jwk, kid: jwk.kid };
}
