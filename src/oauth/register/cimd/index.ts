import { LRUCache } from 'lru-cache';
import type { Config } from '../../../config/index.js';
import {
  OutboundLimitError,
  OutboundRefusedError,
  outboundOptionsOf,
  sharedOutbound,
  type Outbound,
} from '../../../http/outbound.js';
import type { Logger } from '../../../log/index.js';
import type { GrantedResource, PolicyEngine } from '../../../policy/index.js';
import { HttpError, UnavailableToProvider } from '../../../http/errors.js';
import { DEFAULT_TENANT, type Sealer, type Store } from '../../../store/index.js';
import type { ClientDocuments, ClientRecord } from '../../clients/records.js';
import { clientRepository, STORE_FIELDS } from '../../clients/repository.js';
import { freshnessMs } from './caching.js';
import { InvalidDocumentError, parseClientDocument, type ClientDocument } from './document.js';
import { documentUrl, looksLikeDocumentUrl } from './url.js';

export { looksLikeDocumentUrl } from './url.js';

/*
 * Client ID metadata documents (spec: "Client ID metadata document rules" under GET /authorize).
 * An `https://` client_id names a JSON document describing a public client; it is fetched
 * through the outbound module, checked, and kept as a client record with registrationType
 * `cimd` in the tenant's client collection (so the Admin API lists it and policy inputs see it).
 * The one entry point is `resolve` of the ClientDocuments interface (../clients.ts, which calls it).
 */

export interface ClientDocumentsOptions {
  config: Config;
  store: Store;
  tenant: string;
  policy: PolicyEngine;
  log: Logger;
  sealer: Sealer;
}

/** Documents (or refusals) remembered per tenant; the least recently used go first. */
const CACHE_MAX = 1000;

/**
 * Documents fetched at once in this process, all tenants together. Anyone may name a document
 * URL, and each one not cached is a connection out that a slow host can hold for the whole
 * outbound timeout (found 2026-11-30: nothing bounded them, so a caller's request rate became as
 * many sockets held open, to any public address it chose). Past it, a new document is 503
 * temporarily_unavailable at once, remembering nothing; clients fetched before go on.
 */
export const MAX_DOCUMENT_FETCHES_AT_ONCE = 32;
let fetchesUnderWay = 0;
/** Said once each time the fetches reach their bound (a flood would otherwise log a line per refused request). */
let fullSaid = false;

/**
 * How long a CIMD client record outlives its last use. Anyone can name a document URL without
 * authenticating, so its record is a cache entry with an expiry (the store hides and purges it
 * after `expiresAt`), renewed while the client is in use, never a permanent client.
 */
export const CIMD_RECORD_TTL_MS = 24 * 3_600_000;

interface CacheEntry {
  /** Undefined: the client_id names no usable document (negative entry). */
  document?: ClientDocument;
  /** Of a negative entry: the document's host could not answer (not an invalid document). */
  unreachable?: boolean;
  expiresAt: number;
}

export function createClientDocuments({
  config,
  store,
  tenant,
  policy,
  log,
  sealer,
}: ClientDocumentsOptions): ClientDocuments {
  // A document is small: its size bounds what a record made from it keeps (and the cache holds).
  const general = outboundOptionsOf(config);
  const outboundOptions = {
    ...general,
    maxResponseBytes: Math.min(general.maxResponseBytes, config.cimdMaxDocumentBytes),
    // Anyone may name a document's host: it gets a caller's share of the DNS lookups.
    namesFrom: 'caller' as const,
  };
  const secure = sharedOutbound(outboundOptions);
  // http://localhost and http://127.0.0.1 only, and only under the flag: the guard is relaxed for
  // those two hosts alone (redirects are refused, so a fetch cannot wander elsewhere).
  const insecureLocal = config.cimdAllowInsecureLocalhost
    ? sharedOutbound({ ...outboundOptions, allowInsecureLoopback: true })
    : undefined;
  // Made at the tenant's first document: an LRUCache sets aside room for all its entries when made
  // (about 20 KB for 1,000), and most tenants never see a document client.
  let documents: LRUCache<string, CacheEntry> | undefined;
  const cache = () => (documents ??= new LRUCache<string, CacheEntry>({ max: CACHE_MAX }));
  const inFlight = new Map<string, Promise<ClientDocument | undefined>>();
  const clients = clientRepository(store, sealer);
  const tenantId = tenant === DEFAULT_TENANT ? null : tenant;
  // Unknown, unreachable or invalid documents are remembered this long (the negative cache), so
  // that a bad client_id cannot make Arbiter fetch on every request.
  const refusalTtlMs = config.cimdNegativeCacheSeconds * 1000;
  /** Until when the tenant is known to hold SERVICE_REGISTRATION_CIMD_MAX_CLIENTS document clients. */
  let fullUntil = 0;

  /** The document for `clientId`, from the cache while fresh, else fetched (one fetch at a time per URL). */
  async function currentDocument(clientId: string): Promise<ClientDocument | undefined> {
    const cached = documents?.get(clientId);
    if (cached && cached.expiresAt > Date.now()) return cached.document;
    let pending = inFlight.get(clientId);
    if (!pending) {
      if (fetchesUnderWay >= MAX_DOCUMENT_FETCHES_AT_ONCE) {
        if (!fullSaid)
          log.warn(
            { tenant, underWay: fetchesUnderWay },
            'client metadata documents: as many fetches under way as allowed; new documents are refused with 503 until some end',
          );
        fullSaid = true;
        throw new DocumentFetchesFullError();
      }
      fetchesUnderWay += 1;
      pending = fetchDocument(clientId).finally(() => {
        fetchesUnderWay -= 1;
        if (fetchesUnderWay < MAX_DOCUMENT_FETCHES_AT_ONCE / 2) fullSaid = false;
        inFlight.delete(clientId);
      });
      inFlight.set(clientId, pending);
    }
    return pending;
  }

  async function fetchDocument(clientId: string): Promise<ClientDocument | undefined> {
    const checked = documentUrl(clientId, config.cimdAllowInsecureLocalhost);
    if ('refused' in checked) {
      log.info({ tenant, clientId, reason: checked.refused }, 'client metadata document URL refused');
      return remember(clientId, undefined, refusalTtlMs);
    }
    const outbound: Outbound = checked.insecureLocal && insecureLocal ? insecureLocal : secure;
    try {
      const response = await outbound.fetch(checked.url, {
        headers: { accept: 'application/json' },
        redirect: 'error',
      });
      if (response.status >= 500)
        throw new UnreachableDocumentError(`${checked.url.origin} answered ${response.status}`);
      if (!response.ok) throw new InvalidDocumentError(`${checked.url.origin} answered ${response.status}`);
      let body: unknown;
      try {
        body = JSON.parse(await response.text());
      } catch {
        throw new InvalidDocumentError('not JSON');
      }
      return remember(clientId, parseClientDocument(body, clientId), freshnessMs(response.headers));
    } catch (error) {
      log.info({ tenant, clientId, reason: (error as Error).message }, 'client metadata document unusable');
      return remember(clientId, undefined, refusalTtlMs, isUnreachable(error));
    }
  }

  function remember(
    clientId: string,
    document: ClientDocument | undefined,
    ttlMs: number,
    unreachable = false,
  ): ClientDocument | undefined {
    const ttl = document ? ttlMs : Math.min(ttlMs, refusalTtlMs);
    if (ttl > 0)
      cache().set(clientId, { document, expiresAt: Date.now() + ttl, ...(unreachable ? { unreachable } : {}) });
    else documents?.delete(clientId);
    return document;
  }

  /** The document's host could not answer when it was last asked, within the negative cache's time. */
  function hostUnreachable(clientId: string): boolean {
    const cached = documents?.get(clientId);
    return cached?.unreachable === true && cached.expiresAt > Date.now();
  }

  /**
   * Rules 4 and 5: the stored public client, created or brought up to date with the document,
   * through the client repository (src/records): the catalog's client schema is its validator.
   */
  async function stored(document: ClientDocument, existing: ClientRecord | null): Promise<ClientRecord> {
    const fields = {
      redirectUris: document.redirectUris,
      clientName: document.clientName,
      clientUri: document.clientUri,
      logoUri: document.logoUri,
      dpopBoundAccessTokens: document.dpopBoundAccessTokens,
      clientType: 'public' as const,
      tokenEndpointAuthMethod: 'none' as const,
      registrationType: 'cimd' as const,
      // `input.client.granted_resources` of every later decision (clients/input.ts).
      grantedResources: await grantedResources(policy),
    };
    const expiresAt = Date.now() + CIMD_RECORD_TTL_MS;
    if (!existing) {
      await assertRoomForAnother();
      try {
        const body = withoutUndefined({ ...fields, clientId: document.clientId, tenantId });
        return (await clients.createRecord(tenantId, body, { expiresAt })).record;
      } catch (error) {
        if (!(error instanceof HttpError && error.status === 409)) throw error;
        // Another request created it first.
        const winner = await clients.collection(tenantId).findOne({ clientId: document.clientId });
        if (!winner) throw error;
        return stored(document, winner);
      }
    }
    // The record as it is now, not as it was before the fetch, which the document's host timed:
    // what an operator did meanwhile (disabled the client, say) stands (found 2026-11-30).
    const current = await clients.collection(tenantId).get(existing.id);
    if (!current) return stored(document, null);
    if (unchanged(current, fields) && !expiresSoon(current)) return current;
    // A full replacement, so that a field the document dropped is dropped here too; what an
    // operator set (enabled, scopes) and the record's identity are kept.
    const kept: Record<string, unknown> = { ...current };
    for (const key of [...STORE_FIELDS, 'clientName', 'clientUri', 'logoUri', 'dpopBoundAccessTokens'])
      delete kept[key];
    // A record an operator replaced through the Admin API lost its expiry: it is theirs, kept for good.
    const renewed = typeof current.expiresAt === 'number' ? { expiresAt } : {};
    const body = withoutUndefined({ ...kept, ...fields, tenantId });
    return (await clients.replaceRecord(tenantId, current, body, renewed)).record;
  }

  /**
   * Anyone can name a new document URL without authenticating, and each becomes a record for a
   * day: past SERVICE_REGISTRATION_CIMD_MAX_CLIENTS live ones in the tenant, a new one is refused
   * (a 400 to storedUnlessRefused, so the URL is remembered as unusable) until some expire.
   */
  async function assertRoomForAnother(): Promise<void> {
    const full = () =>
      new HttpError(400, 'invalid_client', 'this server holds as many document clients as it may; try again later');
    // Full a moment ago: neither counted again (a count reads every client record) nor logged again
    // for each new URL tried.
    if (Date.now() < fullUntil) throw full();
    const held = await clients
      .collection(tenantId)
      .count({ registrationType: 'cimd' }, undefined, config.cimdMaxClients);
    if (held < config.cimdMaxClients) return;
    fullUntil = Date.now() + refusalTtlMs;
    log.warn(
      { tenant, held, limit: config.cimdMaxClients },
      'client metadata document clients at their limit (SERVICE_REGISTRATION_CIMD_MAX_CLIENTS): a new one is refused until some expire',
    );
    throw full();
  }

  return {
    async resolve(clientId, existing) {
      if (!looksLikeDocumentUrl(clientId)) return undefined;
      if (existing && existing.registrationType !== 'cimd') return undefined;
      const fresh = documents?.get(clientId);
      const wasCached = fresh !== undefined && fresh.expiresAt > Date.now();
      const keptUsable = existing !== null && !recordExpired(existing) && existing.enabled !== false;
      let document: ClientDocument | undefined;
      try {
        document = await currentDocument(clientId);
      } catch (error) {
        // No fetch could start now: a client stored from its document before goes on as stored.
        if (error instanceof DocumentFetchesFullError && keptUsable) return existing;
        throw error;
      }
      // A host that cannot answer now (down, timing out) says nothing against a client stored from
      // its document before: it goes on as stored until its record expires. One never stored is refused.
      if (!document) return keptUsable && hostUnreachable(clientId) ? existing : undefined;
      // Served from the cache, the stored record already matches it (unless it was deleted since).
      const record = wasCached && existing ? existing : await storedUnlessRefused(clientId, document, existing);
      return record?.enabled === false ? undefined : record;
    },
  };

  /** As `stored`; a document whose client the catalog's schema refuses names no usable client (remembered so). */
  async function storedUnlessRefused(
    clientId: string,
    document: ClientDocument,
    existing: ClientRecord | null,
  ): Promise<ClientRecord | undefined> {
    try {
      return await stored(document, existing);
    } catch (error) {
      if (!(error instanceof HttpError && error.status === 400)) throw error;
      log.info({ tenant, clientId, reason: error.message }, 'client metadata document unusable');
      remember(clientId, undefined, refusalTtlMs);
      return undefined;
    }
  }
}

/** Rule 5: `oauth.public_client_policy.cimd.granted_resources` of the policy data in force. */
async function grantedResources(policy: PolicyEngine): Promise<GrantedResource[]> {
  const oauth = (await policy.policyData('oauth')) as
    { public_client_policy?: { cimd?: { granted_resources?: unknown } } } | undefined;
  const granted = oauth?.public_client_policy?.cimd?.granted_resources;
  if (!Array.isArray(granted)) return [];
  return granted
    .filter(
      (entry): entry is GrantedResource =>
        typeof entry?.type === 'string' &&
        Array.isArray(entry?.scopes) &&
        entry.scopes.every((scope: unknown) => typeof scope === 'string'),
    )
    .map((entry) => ({ type: entry.type, scopes: [...entry.scopes] }));
}

/**
 * A fetch that failed for want of an answer (a network error, a timeout, a 5xx), not because the
 * document or its URL is unusable (a refused destination, a limit passed, a 4xx, not a document).
 */
function isUnreachable(error: unknown): boolean {
  if (error instanceof UnreachableDocumentError) return true;
  if (error instanceof InvalidDocumentError || error instanceof HttpError) return false;
  return !(error instanceof OutboundRefusedError || error instanceof OutboundLimitError);
}

class UnreachableDocumentError extends Error {}

/** No document fetch can start now: thrown in oidc-provider's client lookup, so shaped for its error handler. */
class DocumentFetchesFullError extends UnavailableToProvider {
  constructor() {
    super(
      'client metadata documents',
      `${MAX_DOCUMENT_FETCHES_AT_ONCE} document fetches were under way in this process`,
      'too many client metadata documents are being fetched now: retry later',
      1,
    );
  }
}

function recordExpired(record: ClientRecord): boolean {
  return typeof record.expiresAt === 'number' && record.expiresAt <= Date.now();
}

/** A record in use is renewed once half its lifetime has passed (one write a half-day, not one a request). */
function expiresSoon(record: ClientRecord): boolean {
  return typeof record.expiresAt === 'number' && record.expiresAt - Date.now() < CIMD_RECORD_TTL_MS / 2;
}

function unchanged(existing: ClientRecord, fields: Record<string, unknown>): boolean {
  return Object.entries(fields).every(
    ([key, value]) =>
      JSON.stringify((existing as Record<string, unknown>)[key] ?? null) === JSON.stringify(value ?? null),
  );
}

function withoutUndefined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}
