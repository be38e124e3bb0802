import { execFileSync } from 'node:child_process';
import Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { clientRecords, resourceServerRecords, subjectRecords } from '../../src/catalog/index.js';
import type { Store } from '../../src/store/index.js';
import { openStore } from '../../src/store/open.js';
import type { AuditFacts } from '../../src/audit/index.js';
import type { ArbiterState } from '../../src/state.js';
import { projectPath } from '../../src/config/index.js';

/**
 * What unit tests share: a real store in memory (SQLite, the store the server runs on by default),
 * a bare oidc-provider (its in-memory adapter holds the codes and refresh tokens a test saves), and
 * a context shaped as oidc-provider hands one to a grant: no socket, no policy engine (see
 * stub-policy.ts), no server.
 */

export const TENANT = '_default';

/** A fresh SQLite store in memory, closed after the enclosing describe. */
export function memoryStore(): () => Store {
  let store: Store | undefined;
  before(async function () {
    store = await openStore('sqlite::memory:');
  });
  after(async function () {
    await store?.close();
  });
  return () => {
    if (!store) throw new Error('the memory store is opened in a before hook: use it inside a test');
    return store;
  };
}

/** A bare provider: its models (AuthorizationCode, RefreshToken, Grant) kept in oidc-provider's memory adapter. */
export function bareProvider(issuer = 'http://127.0.0.1:1'): Provider {
  return new Provider(issuer, {
    features: { devInteractions: { enabled: false }, resourceIndicators: { enabled: true } },
    ttl: { Grant: 600, RefreshToken: 600, AuthorizationCode: 60, AccessToken: 60, ClientCredentials: 60 },
  });
}

export interface FakeContextOptions {
  params?: Record<string, unknown>;
  client?: { clientId: string; clientAuthMethod?: string };
  headers?: Record<string, string>;
  path?: string;
  method?: string;
  /** An audit entry in the making, as the audit step leaves one on the state. */
  audit?: boolean;
}

/** A Koa context with what oidc-provider's grant handlers and Arbiter's gates read: params, client, headers, state, body. */
export function fakeOidcContext(options: FakeContextOptions = {}): KoaContextWithOIDC & { state: ArbiterState } {
  const headers = Object.fromEntries(Object.entries(options.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  const state = { tenant: TENANT, requestId: 'unit-request' } as unknown as ArbiterState;
  if (options.audit) state.audit = {} as AuditFacts;
  const ctx = {
    path: options.path ?? '/token',
    method: options.method ?? 'POST',
    state,
    body: undefined as unknown,
    headers,
    get: (name: string) => headers[name.toLowerCase()] ?? '',
    oidc: {
      params: { ...(options.params ?? {}) },
      client: options.client ?? { clientId: 'unit-client', clientAuthMethod: 'client_secret_basic' },
    },
  };
  return ctx as unknown as KoaContextWithOIDC & { state: ArbiterState };
}

/** A confidential client record in `store` (what the Admin API writes), for inputs that read it. */
export async function saveClient(
  store: Store,
  clientId: string,
  fields: Record<string, unknown> = {},
  tenant = TENANT,
): Promise<void> {
  const records = clientRecords(store, tenant);
  const id = await store.nextSequence(clientRecords.spec.name);
  await records.insert({
    id,
    tenantId: null,
    clientId,
    clientType: 'confidential',
    enabled: true,
    scopes: ['read'],
    ...fields,
  });
}

/** A subject record in `store`. */
export async function saveSubject(store: Store, subjectId: string, fields: Record<string, unknown> = {}) {
  const id = await store.nextSequence(subjectRecords.spec.name);
  await subjectRecords(store, TENANT).insert({ id, tenantId: null, subjectId, ...fields });
}

/** A resource server record in `store`. */
export async function saveResourceServer(
  store: Store,
  resourceIndicator: string,
  fields: Record<string, unknown> = {},
) {
  const id = await store.nextSequence(resourceServerRecords.spec.name);
  await resourceServerRecords(store, TENANT).insert({
    id,
    tenantId: null,
    resourceIndicator,
    enabled: true,
    ...fields,
  });
}

/** The OAuth error a promise rejects with: its code, description and status (oidc-provider's or Arbiter's errors). */
export async function rejection(
  promise: Promise<unknown>,
): Promise<{ error: string; error_description?: string; status?: number; message: string }> {
  try {
    await promise;
  } catch (error) {
    return error as { error: string; error_description?: string; status?: number; message: string };
  }
  throw new Error('expected a rejection, got a result');
}

/**
 * Runs `body` as an ES module (through tsx, from the project root) in a fresh process, where
 * `loaded(part)` says whether a module (ES or CommonJS, a source file or a package's) whose URL
 * contains `part` was loaded so far, and returns what `body` prints last (JSON): for what this
 * process may have loaded already. Loads are seen through a module hook and require's cache: the
 * cache only holds CommonJS modules (an ES module such as oidc-provider, got or any source file
 * never shows there), and a require that tsx serves passes no hook.
 */
export function inFreshProcess<T>(body: string): T {
  const script = `
    import { createRequire, registerHooks } from 'node:module';
    const urls = new Set();
    registerHooks({ load: (url, context, next) => (urls.add(url), next(url, context)) });
    const required = createRequire(import.meta.url).cache;
    const loaded = (part) => [...urls, ...Object.keys(required)].some((url) => url.includes(part));
    ${body}
  `;
  const output = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: projectPath(),
    encoding: 'utf8',
  });
  return JSON.parse(output.trim().split('\n').at(-1)!) as T;
}
