/**
 * A real policy layer for tests: an in-memory store seeded with the default pack, a small Koa
 * server serving the bundle on a free loopback port, and an engine whose managed OPA polls it.
 * Nothing here stands in for OPA or Cedar.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa, { type Middleware } from 'koa';
import { loadConfig, type Config } from '../../src/config/index.js';
import { createLogger } from '../../src/log/index.js';
import {
  BUNDLE_PATH,
  createPolicyEngine,
  POLICY_DATA,
  POLICY_RULES,
  requestInput,
  seedDefaultPolicies,
  waitUntilReady,
  type ClientInput,
  type DecisionInput,
  type PolicyDataDoc,
  type PolicyRuleDoc,
  type RequestInputParts,
  type RunningPolicyEngine,
  type SubjectInput,
} from '../../src/policy/index.js';
import { openArbiterStore as openStore } from '../../src/collections.js';
import { DEFAULT_TENANT, type Store } from '../../src/store/index.js';

export const BUNDLE_TOKEN = 'test-bundle-token-0123456789abcdef';
export const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

/** Configuration exactly as production loads it, with fast polling. */
export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    PORT: '0',
    STORE_URL: 'sqlite::memory:',
    POLICY_POLL_MIN_SECONDS: '1',
    POLICY_POLL_MAX_SECONDS: '2',
    POLICY_BUNDLE_TOKEN: BUNDLE_TOKEN,
    POLICY_DECISION_TIMEOUT_MS: '2000',
    LOG_LEVEL: 'silent',
    ...env,
  });
}

export interface BundleServer {
  url: string;
  bundleUrl: string;
  /** Swaps the middleware that serves requests (the engine's bundle middleware once it exists). */
  use(middleware: Middleware): void;
  close(): Promise<void>;
}

export async function startBundleServer(): Promise<BundleServer> {
  let current: Middleware = async (_ctx, next) => next();
  const app = new Koa();
  // Served at its own path only, as the route table (src/routes.ts) serves it.
  app.use((ctx, next) => (ctx.path === BUNDLE_PATH ? current(ctx, next) : next()));
  const server: Server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    bundleUrl: `${url}${BUNDLE_PATH}`,
    use(middleware) {
      current = middleware;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface PolicyHarness {
  store: Store;
  engine: RunningPolicyEngine;
  bundleServer: BundleServer;
  config: Config;
  close(): Promise<void>;
}

/** Store + seeded pack + bundle server + engine (managed OPA unless OPA_URL is in `env`), ready to decide. */
export async function startPolicyHarness(
  env: Record<string, string> = {},
  options: { waitForBundle?: boolean } = {},
): Promise<PolicyHarness> {
  const config = testConfig(env);
  const store = await openStore(config.storeUrl);
  await seedDefaultPolicies(store, log);
  const bundleServer = await startBundleServer();
  const engine = await createPolicyEngine({ config, store, log, bundleUrl: bundleServer.bundleUrl });
  bundleServer.use(engine.bundleMiddleware());
  if (options.waitForBundle !== false && !(await waitUntilReady(engine, 20_000)))
    throw new Error('OPA did not activate the bundle');
  return {
    store,
    engine,
    bundleServer,
    config,
    async close() {
      await engine.close();
      await bundleServer.close();
      await store.close();
    },
  };
}

/** One way to draw a test port for every test: the server's (it avoids ports fetch refuses). */
export { freePort } from '../support/server.js';

/** Writes a rule the way the Admin API does (upsert by path within its tenant). */
export async function putRule(
  store: Store,
  rule: Partial<PolicyRuleDoc> & Pick<PolicyRuleDoc, 'path' | 'content'>,
): Promise<PolicyRuleDoc> {
  const tenantId = rule.tenantId ?? null;
  const rules = store.collection<PolicyRuleDoc>(POLICY_RULES, tenantId ?? DEFAULT_TENANT);
  const existing = await rules.findOne({ path: rule.path });
  const now = new Date().toISOString();
  const doc: PolicyRuleDoc = {
    id: existing?.id ?? (await store.nextSequence('policy_rules')),
    version: null,
    kind: rule.path.endsWith('.cedar') ? 'cedar' : 'rego',
    enabled: true,
    digest: null,
    createdAt: existing?.createdAt ?? now,
    ...rule,
    tenantId,
    updatedAt: now,
  };
  return rules.upsert(doc);
}

/** Writes a data entry the way the Admin API does (upsert by key within its tenant). */
export async function putData(
  store: Store,
  dataKey: string,
  payload: unknown,
  extra: Partial<PolicyDataDoc> = {},
): Promise<PolicyDataDoc> {
  const tenantId = extra.tenantId ?? null;
  const data = store.collection<PolicyDataDoc>(POLICY_DATA, tenantId ?? DEFAULT_TENANT);
  const existing = await data.findOne({ dataKey });
  const now = new Date().toISOString();
  return data.upsert({
    id: existing?.id ?? (await store.nextSequence('policy_data')),
    version: null,
    createdAt: existing?.createdAt ?? now,
    ...extra,
    dataKey,
    payload: JSON.stringify(payload),
    tenantId,
    updatedAt: now,
  });
}

export async function ruleAt(store: Store, path: string): Promise<PolicyRuleDoc> {
  const rule = await store.collection<PolicyRuleDoc>(POLICY_RULES, DEFAULT_TENANT).findOne({ path });
  if (!rule) throw new Error(`no rule at ${path}`);
  return rule;
}

/** Retries `check` until it stops throwing (policy changes land at OPA's next poll). */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      // A short step: most checks pass within a few hundred ms (OPA long-polls the bundle).
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export const confidentialClient: ClientInput = {
  client_id: 'billing-service',
  client_type: 'confidential',
  registration_type: 'admin',
  scopes: ['invoices.read', 'invoices.write'],
  granted_resources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }],
  token_endpoint_auth_method: 'client_secret_basic',
  authenticated_with: 'client_secret_basic',
};

export const publicClient: ClientInput = {
  ...confidentialClient,
  client_id: 'spa',
  client_type: 'public',
  token_endpoint_auth_method: 'none',
  authenticated_with: 'none',
};

export const alice: SubjectInput = { sub: 'alice', idp: 'corp', claims: { name: 'Alice', email: 'alice@example.com' } };

/** A complete input: common fields plus point-specific ones in `extra`. */
export function decisionInput(
  parts: { client?: ClientInput | null; subject?: SubjectInput | null; request: RequestInputParts },
  extra: Record<string, unknown> = {},
): DecisionInput {
  return {
    tenant: DEFAULT_TENANT,
    client: parts.client ?? null,
    subject: parts.subject ?? null,
    request: requestInput(parts.request),
    time: new Date().toISOString(),
    ...extra,
  };
}
