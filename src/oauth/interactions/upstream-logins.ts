import type { InteractionResults } from 'oidc-provider';
import { storageDigest, type Store, type StoredDoc, type TenantCollection } from '../../store/index.js';
import { openedChecks, sealedChecks } from './sealed-checks.js';
import type { UpstreamChecks } from './upstream.js';

/** An upstream round trip may include typing a password; after this the state is refused. */
const UPSTREAM_LOGIN_TTL_MS = 10 * 60_000;

/**
 * One sign-in at an upstream provider, from the redirect to the callback and on to the
 * interaction. It lives in the store, not in a cookie: oidc-provider's interaction cookie
 * is scoped to /interaction/:uid, so the callback at /idp/callback never sees it, and a
 * store record also works when the callback reaches another node.
 *
 * pending → (callback, once) exchanging → finished with an outcome → taken (deleted) by the interaction.
 */
interface UpstreamLogin extends StoredDoc {
  /** The digest of the `state` sent upstream (a copy of the store must not let anyone complete a sign-in). */
  id: string;
  /** The interaction this sign-in completes. */
  uid: string;
  /** Internal id of the identity provider record. */
  identityProviderId: number;
  /** The redirect_uri sent upstream: the response must come back there (absent: begun by an older release, the shared one). */
  redirectUri?: string;
  /** The digest of the browser binding: the callback is taken only from the browser that was sent upstream (see router.ts). */
  browserDigest?: string;
  status: 'pending' | 'exchanging' | 'finished';
  /** The nonce and PKCE verifier, sealed for the holder of `state` (sealedChecks): a copy of the store opens neither. */
  checks: string | null;
  outcome: InteractionResults | null;
  expiresAt: number;
  createdAt: string;
}

export interface ClaimedLogin {
  uid: string;
  identityProviderId: number;
  redirectUri?: string;
  checks: UpstreamChecks;
}

export const UPSTREAM_LOGINS_COLLECTION = { name: 'upstream_logins', indexes: ['uid'] };

export class UpstreamLogins {
  private readonly logins: TenantCollection<UpstreamLogin>;

  constructor(store: Store, tenant: string) {
    this.logins = store.collection<UpstreamLogin>(UPSTREAM_LOGINS_COLLECTION, tenant);
  }

  /**
   * Remembers a sign-in for interaction `uid` that was sent upstream with these checks, in place
   * of one still pending for it: its page loaded again sends the browser upstream again, and the
   * earlier state can no longer complete (nor be stored once per load, 10 minutes each).
   */
  async begin(
    uid: string,
    identityProviderId: number,
    redirectUri: string,
    checks: UpstreamChecks,
    browser: string,
  ): Promise<void> {
    await this.logins.deleteMany({ uid, status: 'pending' });
    await this.logins.insert({
      id: storageDigest(checks.state),
      uid,
      identityProviderId,
      redirectUri,
      browserDigest: storageDigest(browser),
      status: 'pending',
      checks: sealedChecks(checks),
      outcome: null,
      expiresAt: Date.now() + UPSTREAM_LOGIN_TTL_MS,
      createdAt: new Date().toISOString(),
    });
  }

  /**
   * The pending sign-in of this state, exactly once, when `browser` is the binding of the browser
   * it was begun in: a replayed or unknown state, or one brought by another browser, gives null
   * (and the sign-in stays pending for its own browser).
   */
  async claim(state: string, browser: string | undefined): Promise<ClaimedLogin | null> {
    const id = storageDigest(state);
    const claimed =
      (browser
        ? await this.logins.update(
            id,
            { status: 'exchanging' },
            { status: 'pending', browserDigest: storageDigest(browser) },
          )
        : null) ??
      // Begun by the release before the binding, for ten minutes at most after an upgrade: as it was then.
      (await this.logins.update(id, { status: 'exchanging' }, { status: 'pending', browserDigest: null }));
    const checks = claimed?.checks ? openedChecks(state, claimed.checks) : null;
    if (!claimed || checks === null) return null;
    const { uid, identityProviderId, redirectUri } = claimed;
    return { uid, identityProviderId, ...(redirectUri ? { redirectUri } : {}), checks };
  }

  /** Records how the upstream part ended; the verifier and nonce are no longer needed. */
  async finish(state: string, outcome: InteractionResults): Promise<void> {
    await this.logins.update(storageDigest(state), { status: 'finished', outcome, checks: null });
  }

  /** The outcome for interaction `uid`, handed out once. */
  async take(uid: string): Promise<InteractionResults | null> {
    const finished = await this.logins.findOne({ uid, status: 'finished' });
    if (!finished?.outcome || !(await this.logins.delete(finished.id))) return null;
    return finished.outcome;
  }
}
