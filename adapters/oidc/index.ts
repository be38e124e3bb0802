import { decodeJwt } from 'jose';
import { errors, type Adapter, type AdapterPayload } from 'oidc-provider';
import { storageDigest } from '../../src/store/digest.js';
import { EVENT_LOOP_PACE, inPacedSteps } from '../../src/store/paced.js';
import { pagesByKey } from '../../src/store/paged.js';
import { TurnReads } from '../../src/store/turn-reads.js';
import {
  ConflictError,
  type Filter,
  type Store,
  type StoredDoc,
  type TenantCollection,
} from '../../src/store/types.js';
import { OIDC_COLLECTION, OIDC_UPGRADES_COLLECTION } from './collection.js';

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
  /** Each absent (or null, as written by earlier releases) when the artefact has none: it then costs nothing in its index. */
  grantId?: string | null;
  /** The client and the user the artefact belongs to, top-level so that revocation finds them by index. */
  clientId?: string | null;
  accountId?: string | null;
  uid?: string | null;
  userCode?: string | null;
  expiresAt: number | null;
  consumedAt?: number | null;
  /** How `id` was derived from the value; absent on artefacts written before values were hashed. */
  idDigest?: 'sha256';
  /** The payload carried `jti` (= the value), which `find` restores. */
  hadJti?: boolean;
  /** `clientId` and `accountId` are set; absent on artefacts written before they were (upgradeLegacyArtefacts). */
  ownersIndexed?: true;
  /** The client's token epoch it was made under (ArtefactOwners); null: under none (its client could hold none). */
  issuedUnder?: string | null;
  /** A session's issuer below ISSUER ('' or `/t/<tenant>`): whose logout tokens its clients expect (signedInSessions). */
  issuerPath?: string;
}

/**
 * What an artefact of a client hangs on (src/oauth/shared/owned-artefacts.ts): its client, and
 * what it names (a requesting party token's UMA resources). Each artefact of a client is marked, when written, with the client's token epoch as the request saw it before
 * issuing; a revocation of the client's tokens (a disable, a delete, an operator's revoke) moves
 * the epoch on, so an artefact written under an earlier one, even after the revocation swept the
 * store, is never found again, whatever the order of the two.
 */
export interface ArtefactOwners {
  /** The mark of what `clientId` issues now; null when it may hold nothing (disabled or gone). */
  markOf(clientId: string): Promise<string | null>;
  /** Whether the artefact may still be used. */
  honours(artefact: OwnedArtefact): Promise<boolean>;
}

/** A stored artefact of a client, as ArtefactOwners judges it. */
export interface OwnedArtefact {
  clientId: string;
  /** The mark it was written under; undefined: written before artefacts were marked. */
  mark: string | null | undefined;
  payload: AdapterPayload;
}

/** Models that oidc-provider asks for which live in other collections (e.g. clients from the Admin API). */
export type ModelOverride = (id: string) => Promise<AdapterPayload | undefined>;

/**
 * RFC 8628: oidc-provider finds a DeviceCode by its user code (findByUserCode is not given the
 * device code), saves it again under its `jti`, and names it by that `jti` in the interaction
 * that signs the user in. So a DeviceCode found by user code gets as `jti` a reference to its
 * document, `digest:<digest of the device code>`, which `key` maps back to the same document:
 * neither the device code nor the user code is ever stored, only their digests. A device code
 * oidc-provider hands out is a nanoid, never holding a colon, and the token endpoint refuses any
 * other (src/oauth/device/polling.ts), so a digest read from a copy of the store redeems nothing.
 */
const DIGEST_REFERENCE = 'digest:';

/**
 * RFC 8628 §3.5: a device polling with an expired device code is told `expired_token`, and a user
 * entering an expired user code that it expired, not that the code is unknown. oidc-provider tells
 * them apart by the payload's `exp`, which it checks itself; so the store keeps a device code this
 * long past its expiry instead of dropping it at once.
 */
const DEVICE_CODE_KEPT_EXPIRED_SECONDS = 600;

/** How a user code is kept (its index and its payload field): its digest, as a reference. */
function keptUserCode(userCode: string): string {
  return userCode.startsWith(DIGEST_REFERENCE) ? userCode : `${DIGEST_REFERENCE}${storageDigest(userCode)}`;
}

/** The key an artefact is stored under: the model and a digest of its value, never the value. */
export function artefactKey(model: string, value: string): string {
  return keyOfDigest(model, storageDigest(value));
}

function keyOfDigest(model: string, digest: string): string {
  return `${model}:${digest}`;
}

/**
 * Builds the oidc-provider Adapter class for one tenant. All models share one
 * collection so that revoking a grant removes its codes and tokens in one call.
 */
export function createOidcAdapter(
  store: Store,
  tenant: string,
  overrides: Record<string, ModelOverride> = {},
  owners?: ArtefactOwners,
  issuerPath = '',
) {
  const artefacts: TenantCollection<OidcDoc> = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);
  const migrated = () => upgradeLegacyArtefacts(store, tenant, artefacts);
  const tokenLookups = new TokenLookups(store, tenant, artefacts);
  /** The one check at use of every stored artefact of a client: found only while its owners honour it. */
  const honoured = async (doc: OidcDoc | null | undefined): Promise<OidcDoc | undefined> =>
    doc &&
    (!owners ||
      !doc.clientId ||
      (await owners.honours({ clientId: doc.clientId, mark: doc.issuedUnder, payload: doc.payload })))
      ? doc
      : undefined;

  return class StoreAdapter implements Adapter {
    constructor(private readonly model: string) {}

    private key(id: string): string {
      if (this.model === 'DeviceCode' && id.startsWith(DIGEST_REFERENCE))
        return keyOfDigest(this.model, id.slice(DIGEST_REFERENCE.length));
      return artefactKey(this.model, id);
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      await migrated();
      const kept = expiresIn && this.model === 'DeviceCode' ? expiresIn + DEVICE_CODE_KEPT_EXPIRED_SECONDS : expiresIn;
      const doc = storedDoc(this.model, this.key(id), payload, kept ? Date.now() + kept * 1000 : null);
      if (owners && doc.clientId) doc.issuedUnder = await owners.markOf(doc.clientId);
      if (this.model === 'Session') doc.issuerPath = issuerPath;
      if (this.model === 'DeviceCode' && (await deviceCodeSettled(artefacts, doc.id))) return;
      await artefacts.upsert(doc);
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const override = overrides[this.model];
      if (override) return override(id);
      await migrated();
      const doc = await honoured(
        TOKEN_MODELS.includes(this.model) ? await tokenLookups.find(this.model, id) : await artefacts.get(this.key(id)),
      );
      return doc ? restoredPayload(doc, id) : undefined;
    }

    /** The DeviceCode with this user code, named by a reference to its document (see DIGEST_REFERENCE). */
    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      await migrated();
      const doc = await honoured(await artefacts.findOne({ model: this.model, userCode: keptUserCode(userCode) }));
      if (!doc) return undefined;
      return { ...doc.payload, userCode, jti: `${DIGEST_REFERENCE}${doc.id.slice(this.model.length + 1)}` };
    }

    /**
     * Sessions are found by uid without their id (the session cookie, which is not stored), so
     * the payload comes without `jti`. oidc-provider only reads such a session (its account and
     * grants, to check an interaction or a session-bound token); it never saves or destroys it.
     */
    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      await migrated();
      return (await honoured(await artefacts.findOne({ model: this.model, uid })))?.payload;
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
      if (!won) {
        // RFC 9700 §4.14.2, RFC 6749 §4.1.2: a second use revokes what the first one produced.
        // oidc-provider does so when it reads the artefact used already; one used by a request
        // running at that moment is found used here instead (found 2026-11-30: its grant stayed).
        if (current?.grantId && REUSE_REVOKES_GRANT.has(this.model)) {
          await revokeGrant(artefacts, current.grantId);
          await artefacts.delete(artefactKey('Grant', current.grantId));
        }
        throw new errors.InvalidGrant('the code or refresh token was already used');
      }
    }

    async destroy(id: string): Promise<void> {
      await migrated();
      await artefacts.delete(this.key(id));
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await migrated();
      await revokeGrant(artefacts, grantId);
    }
  };
}

/**
 * The models a presented token may be: oidc-provider's introspection and revocation look the value
 * up as all three at once (helpers/token_find.js), three store reads for one token.
 */
const TOKEN_MODELS = ['AccessToken', 'ClientCredentials', 'RefreshToken'];

/** A token's rows read this turn (TurnReads): a resource server introspects a hot token many times a second. */
const tokensReadThisTurn = new TurnReads<OidcDoc[]>();

/**
 * One read for the three models, kept for the event-loop turn: a lookup of a value reads its keys
 * under every token model, and the other lookups of that value in the turn share it (TurnReads,
 * with its rule: until the turn ends or a write through the store ends, a revocation, a rotation,
 * a consumption). Each caller gets a copy of the payload (oidc-provider may change what it is given).
 */
class TokenLookups {
  constructor(
    private readonly store: Store,
    private readonly tenant: string,
    private readonly artefacts: TenantCollection<OidcDoc>,
  ) {}

  async find(model: string, value: string): Promise<OidcDoc | undefined> {
    const digest = storageDigest(value);
    const docs = await tokensReadThisTurn.read(this.store, `${this.tenant}\u0000${digest}`, () =>
      this.artefacts.getMany(TOKEN_MODELS.map((name) => keyOfDigest(name, digest))),
    );
    const key = keyOfDigest(model, digest);
    const doc = docs.find((each) => each.id === key);
    return doc && { ...doc, payload: JSON.parse(JSON.stringify(doc.payload)) as AdapterPayload };
  }
}

/**
 * The client of a pushed request (RFC 9126), which oidc-provider keeps only inside its request
 * object: issued (`iss`) as the client that pushed it, signed or not (pushed_authorization_requests.js,
 * process_request_object.js). Kept top-level so that it dies with its client as its tokens do
 * (found 2026-11-29: a request_uri pushed before a client was disabled was still good once it was
 * enabled again).
 */
function pushedBy(payload: AdapterPayload): string | undefined {
  try {
    const { iss } = decodeJwt(String(payload.request));
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
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
  const doc: OidcDoc = {
    id: key,
    model,
    payload: kept,
    expiresAt,
    idDigest: 'sha256',
    hadJti: jti !== undefined,
    ownersIndexed: true,
  };
  if (consumedAt !== undefined) doc.consumedAt = consumedAt;
  // Only the owners it has: an absent field is a null to every filter, and is in no (sparse) index.
  if (kept.grantId != null) doc.grantId = kept.grantId;
  const clientId = model === 'PushedAuthorizationRequest' ? pushedBy(kept) : kept.clientId;
  if (typeof clientId === 'string') doc.clientId = clientId;
  if (typeof kept.accountId === 'string') doc.accountId = kept.accountId;
  if (kept.uid != null) doc.uid = kept.uid;
  if (typeof kept.userCode === 'string') doc.userCode = kept.userCode = keptUserCode(kept.userCode);
  return doc;
}

function restoredPayload(doc: OidcDoc, value: string): AdapterPayload {
  return doc.hadJti ? { ...doc.payload, jti: value } : doc.payload;
}

/** A user's session at the OP: which clients it signed in to, under which session id each, and under which issuer. */
export interface SignedInSession {
  issuerPath: string;
  /** By client id: the `sid` that client was given. */
  sids: Record<string, string>;
}

/**
 * The live sessions of a user (OIDC Back-Channel Logout: the clients to tell when they end),
 * read before they are revoked, a page at a time by key (sessions' keys all begin `Session:`),
 * MAX_SESSIONS_TOLD at most. A session written before issuers were kept is the shared issuer's.
 */
export async function signedInSessions(store: Store, tenant: string, accountId: string): Promise<SignedInSession[]> {
  const artefacts = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);
  const sessions: OidcDoc[] = [];
  for await (const page of pagesByKey(artefacts, { accountId, model: 'Session' }, 'Session:', SESSIONS_PAGE)) {
    sessions.push(...page);
    if (sessions.length >= MAX_SESSIONS_TOLD) break;
  }
  return sessions.slice(0, MAX_SESSIONS_TOLD).map((doc) => ({
    issuerPath: doc.issuerPath ?? '',
    sids: Object.fromEntries(
      Object.entries((doc.payload.authorizations ?? {}) as Record<string, { sid?: string }>)
        .filter(([, authorization]) => typeof authorization.sid === 'string')
        .map(([clientId, authorization]) => [clientId, authorization.sid!]),
    ),
  }));
}

/**
 * Revokes what a browser session issued (its codes, access and refresh tokens: every artefact of
 * each grant that a token or code of the session belongs to), at one client or all, except the
 * grants that hold offline_access: OIDC Back-Channel Logout 1.0 §2.7, refresh tokens issued
 * without it SHOULD be revoked at logout, those with it normally SHOULD NOT. Returns how many
 * artefacts were deleted.
 */
export async function revokeSessionGrants(
  store: Store,
  tenant: string,
  session: { accountId: string; uid: string; clientId?: string },
): Promise<number> {
  const artefacts = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);
  const offline = new Set<string>();
  const grants = new Set<string>();
  // Every artefact of the user, a page at a time by key from the index of both (found 2026-11-29:
  // one read of at most 10,000 missed the session's grant of a user holding more), the event loop
  // free between pages. A bound on the first page too: it names the id the index needs present.
  const owned = { accountId: session.accountId, ...(session.clientId ? { clientId: session.clientId } : {}) };
  for await (const page of pagesByKey(artefacts, owned, '', LOGOUT_PAGE)) {
    for (const doc of page) {
      if (!doc.grantId) continue;
      if (scopesOf(doc.payload).includes('offline_access')) offline.add(doc.grantId);
      if (doc.payload.sessionUid === session.uid) grants.add(doc.grantId);
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  let revoked = 0;
  for (const grantId of grants) {
    if (offline.has(grantId)) continue;
    revoked += await revokeGrant(artefacts, grantId);
    // And the grant (found 2026-11-29: a logout left it for its 14 days).
    if (await artefacts.delete(artefactKey('Grant', grantId))) revoked += 1;
  }
  return revoked;
}

/**
 * Every artefact of a grant (its codes and tokens), in paced steps (src/store/paced.ts): a grant
 * whose refresh token a client rotated in a loop holds one consumed token per rotation (found
 * 2026-11-29: one DELETE of 100,000 held the event loop 534 ms). The grant itself is stored under
 * its own id: oidc-provider destroys it as its revokeGrantPolicy says.
 */
function revokeGrant(artefacts: TenantCollection<OidcDoc>, grantId: string): Promise<number> {
  return inPacedSteps((limit) => artefacts.deleteMany({ grantId }, limit), EVENT_LOOP_PACE, { untilNone: true });
}

/**
 * A device code's user answered (approved or denied) or its device redeemed it: oidc-provider
 * saves the copy it read when the user's page was answered, and a second approval of the same user
 * code read before the first (two browsers, two tabs) would write its copy over the first: another
 * account, and no longer consumed, so that the device could redeem it again (found 2026-11-30). The
 * first answer stands: a later save of such a code changes nothing.
 */
async function deviceCodeSettled(artefacts: TenantCollection<OidcDoc>, key: string): Promise<boolean> {
  const stored = await artefacts.get(key);
  return Boolean(stored && (stored.consumedAt || stored.payload.accountId || stored.payload.error));
}

/** The single-use artefacts whose second use ends their grant (a pushed request's does not: it has none). */
const REUSE_REVOKES_GRANT = new Set(['AuthorizationCode', 'RefreshToken', 'DeviceCode']);

/** The artefacts of one user read at a time at a logout. */
const LOGOUT_PAGE = 1000;

/** A token's scopes, or a grant's (its `openid.scope`). */
function scopesOf(payload: AdapterPayload): string[] {
  const scope = payload.scope ?? (payload.openid as { scope?: unknown } | undefined)?.scope;
  return typeof scope === 'string' ? scope.split(' ') : [];
}

/**
 * At most this many of one user's sessions are told of a logout (each a browser it signed in
 * from; found 2026-11-29: at 100, the clients of a user's 101st session were not told).
 */
const MAX_SESSIONS_TOLD = 10_000;
/** A user's sessions read at a time. */
const SESSIONS_PAGE = 200;

/** The models of access tokens (user-bound, and client credentials' machine tokens). */
const ACCESS_TOKEN_MODELS = ['AccessToken', 'ClientCredentials'];

/**
 * The tenant's live access tokens as stored (payloads without their value), a page at a time,
 * at most `limit` in all: those not expired (`exp` ahead). A revoked token is not among them:
 * revocation deletes it (revokeArtefacts, oidc-provider's destroy). Paged by key, so that a page
 * costs the same however deep it is (events from policy, src/signals).
 */
export async function* liveAccessTokens(
  store: Store,
  tenant: string,
  limit: number,
  pageSize = 500,
): AsyncGenerator<AdapterPayload[]> {
  const artefacts = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);
  let left = limit;
  for (const model of ACCESS_TOKEN_MODELS) {
    if (left <= 0) return;
    for await (const page of pagesByKey(artefacts, { model }, '', pageSize)) {
      const now = Math.floor(Date.now() / 1000);
      const live = page
        .map((doc) => doc.payload)
        .filter((payload) => typeof payload.exp === 'number' && payload.exp > now)
        .slice(0, left);
      left -= live.length;
      if (live.length) yield live;
      if (left <= 0) return;
    }
  }
}

/**
 * Stores an artefact unless one of that model and value is stored and unexpired already, as one
 * atomic insert: true when this call stored it. What oidc-provider's ReplayDetection needs (it
 * looks up, then saves, so that requests at once all passed), for every node on the store.
 */
export async function insertArtefactOnce(
  store: Store,
  tenant: string,
  model: string,
  value: string,
  payload: AdapterPayload,
  expiresAt: number,
): Promise<boolean> {
  const artefacts = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);
  try {
    await artefacts.insert(storedDoc(model, artefactKey(model, value), payload, expiresAt));
    return true;
  } catch (error) {
    if (error instanceof ConflictError) return false;
    throw error;
  }
}

/**
 * Deletes a stored artefact of `model` and `value`: true when this call deleted it. Of requests at
 * once, on any node, exactly one gets true: what a single-use token needs (oidc-provider's
 * `destroy` says nothing of whether there was anything left to destroy).
 */
export function takeArtefact(store: Store, tenant: string, model: string, value: string): Promise<boolean> {
  return store.collection<OidcDoc>(OIDC_COLLECTION, tenant).delete(artefactKey(model, value));
}

/** The payloads of the artefacts named (by artefactKey), or null unless every one is still stored and unexpired: none was revoked. */
export async function remainingArtefacts(
  store: Store,
  tenant: string,
  ids: readonly string[],
): Promise<AdapterPayload[] | null> {
  if (ids.length === 0) return [];
  const unique = [...new Set(ids)];
  const found = await store.collection<OidcDoc>(OIDC_COLLECTION, tenant).getMany(unique);
  return found.length === unique.length ? found.map((doc) => doc.payload) : null;
}

/**
 * Whose artefacts to revoke: a client's (every user's), or a user's (at every client). A client's
 * artefacts issued under `keepMark` (its new token epoch, ArtefactOwners) stay.
 */
export type ArtefactOwner = { clientId: string; keepMark?: string } | { accountId: string };

/**
 * Deletes every artefact of a client or of a user in one tenant: grants, authorization codes,
 * access, refresh and client-credentials tokens, pushed requests, and (of a user) sessions. The
 * store is shared by every node and each of them reads these artefacts from it on every use, so
 * they stop working everywhere as soon as this resolves. Returns how many were deleted.
 *
 * In paced steps (src/store/paced.ts): a client or a user may hold 100,000 tokens, and on SQLite
 * one DELETE of them all held every request of the process for its length (found 2026-11-29:
 * 438 ms). A step may delete fewer than it found (another request deleted some meanwhile), so the
 * sweep ends only at a step that deleted none. What an enabled client is issued meanwhile carries
 * its new epoch and stays (found 2026-11-29: the sweep deleted those too, and a client asking
 * without pause kept it going as long as it asked).
 */
export async function revokeArtefacts(store: Store, tenant: string, owner: ArtefactOwner): Promise<number> {
  const artefacts = store.collection<OidcDoc>(OIDC_COLLECTION, tenant);
  await upgradeLegacyArtefacts(store, tenant, artefacts);
  const owned: Filter = 'clientId' in owner ? { clientId: owner.clientId } : { accountId: owner.accountId };
  const kept = 'clientId' in owner && owner.keepMark ? { issuedUnder: owner.keepMark } : undefined;
  return inPacedSteps((limit) => artefacts.deleteMany(owned, limit, kept), EVENT_LOOP_PACE, { untilNone: true });
}

const LEGACY_BATCH = 200;
/** The row of OIDC_UPGRADES_COLLECTION that says a tenant holds no artefact of an earlier release any more. */
const LEGACY_UPGRADE = 'owners-indexed-and-values-hashed';
const upgraded = new WeakMap<Store, Map<string, Promise<void>>>();

/**
 * Artefacts written by earlier versions are brought up to date by the first use of a tenant's
 * artefacts in this process: those stored before values were hashed (keyed `<model>:<value>`,
 * carrying `jti`) are rewritten under their digest, so live sessions and tokens keep working
 * and no value stays readable; those stored before their client and user were kept top-level
 * get them, so that revoking a client's or a user's artefacts finds them too. A failed attempt
 * is forgotten, so the next use tries again. Nothing indexes the mark of an old artefact, so the
 * search reads every artefact of the tenant: once it finds none, a row says so, and the next
 * processes skip it (found 2026-11-29: with 300,000 tokens, each process's first token of each
 * tenant held the event loop 812 ms). So an upgrade from a release that wrote old artefacts
 * stops every node of that release first: what one still wrote after the marker would stay old.
 */
function upgradeLegacyArtefacts(store: Store, tenant: string, artefacts: TenantCollection<OidcDoc>): Promise<void> {
  let perTenant = upgraded.get(store);
  if (!perTenant) upgraded.set(store, (perTenant = new Map()));
  const known = perTenant.get(tenant);
  if (known) return known;
  const done = store.collection(OIDC_UPGRADES_COLLECTION, tenant);
  const attempt = (async () => {
    if (await done.get(LEGACY_UPGRADE)) return;
    for (;;) {
      const legacy = await artefacts.find({ ownersIndexed: null }, { limit: LEGACY_BATCH });
      if (legacy.length === 0) break;
      for (const doc of legacy) await upgradeArtefact(artefacts, doc);
    }
    await done.upsert({ id: LEGACY_UPGRADE, at: new Date().toISOString() });
  })();
  perTenant.set(tenant, attempt);
  attempt.catch(() => {
    if (perTenant.get(tenant) === attempt) perTenant.delete(tenant);
  });
  return attempt;
}

async function upgradeArtefact(artefacts: TenantCollection<OidcDoc>, doc: OidcDoc): Promise<void> {
  if (doc.idDigest) {
    const { clientId, accountId } = storedDoc(doc.model, doc.id, doc.payload, doc.expiresAt);
    await artefacts.update(doc.id, { clientId, accountId, ownersIndexed: true });
    return;
  }
  const value = doc.id.slice(doc.model.length + 1);
  await artefacts.upsert(
    storedDoc(doc.model, artefactKey(doc.model, value), doc.payload, doc.expiresAt, doc.consumedAt),
  );
  await artefacts.delete(doc.id);
}
