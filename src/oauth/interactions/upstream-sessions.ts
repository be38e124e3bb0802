import { storageDigest, type Store, type StoredDoc, type TenantCollection } from '../../store/index.js';

/**
 * Which user an upstream session signed in (OIDC Back-Channel Logout 1.0 §2.4): a logout token
 * may name the upstream session by `sid` alone, without `sub`, so each sign-in whose ID token
 * carried a `sid` is remembered here, for as long as a session of Arbiter's can live.
 */
interface UpstreamSession extends StoredDoc {
  /** The digest of the identity provider's internal id and its `sid`. */
  id: string;
  identityProviderId: number;
  /** The subject that upstream session signed in. */
  accountId: string;
  expiresAt: number;
}

export const UPSTREAM_SESSIONS_COLLECTION = { name: 'upstream_sessions', indexes: ['identityProviderId'] };

export class UpstreamSessions {
  private readonly sessions: TenantCollection<UpstreamSession>;

  constructor(store: Store, tenant: string) {
    this.sessions = store.collection<UpstreamSession>(UPSTREAM_SESSIONS_COLLECTION, tenant);
  }

  /** `accountId` signed in through upstream session `sid` of the provider; kept `seconds` (a session's lifetime). */
  async remember(identityProviderId: number, sid: string, accountId: string, seconds: number): Promise<void> {
    await this.sessions.upsert({
      id: keyOf(identityProviderId, sid),
      identityProviderId,
      accountId,
      expiresAt: Date.now() + seconds * 1000,
    });
  }

  /** The subject upstream session `sid` signed in, forgotten as it is read (the session is over); null if none. */
  async end(identityProviderId: number, sid: string): Promise<string | null> {
    const key = keyOf(identityProviderId, sid);
    const session = await this.sessions.get(key);
    if (!session || session.expiresAt < Date.now()) return null;
    await this.sessions.delete(key);
    return session.accountId;
  }
}

const keyOf = (identityProviderId: number, sid: string) => storageDigest(`${identityProviderId} ${sid}`);
