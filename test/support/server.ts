import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { loadConfig, type Config } from '../../src/config/index.js';
import { createLogger, type DestinationStream } from '../../src/log/index.js';
import { startServer, type RunningServer } from '../../src/server.js';

export const ADMIN_KEY = 'test-admin-key-0123456789abcdef';

export interface TestServer extends RunningServer {
  config: Config;
  /**
   * fetch against the server, with the Admin API key when `admin` is set (or `key`, another one), at
   * the admin listener with `listener: 'admin'` (ADMIN_PORT), else at the public one.
   */
  request(path: string, init?: RequestOptions): Promise<Response>;
  admin(
    method: string,
    path: string,
    json?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  waitUntilReady(timeoutMs?: number): Promise<void>;
}

export type RequestOptions = RequestInit & {
  admin?: boolean;
  /** An Admin API key to send instead of the bootstrap ADMIN_KEY. */
  key?: string;
  json?: unknown;
  tenant?: string;
  listener?: 'public' | 'admin';
};

export interface TestServerOptions {
  /** Where the server's JSON log lines go (default stdout); set LOG_LEVEL in `env` for there to be any. */
  logStream?: DestinationStream;
}

/**
 * Starts a real Arbiter (real HTTP, real store, real managed OPA) on a free loopback port.
 * `env` overrides configuration exactly as environment variables do in production.
 */
export async function startTestServer(
  env: Record<string, string> = {},
  options: TestServerOptions = {},
): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-test-'));
  const port = await freePort();
  const config = loadConfig({ ...testEnvironment(port, dataDir), ...env });
  const running = await startServer(config, createLogger(config.logLevel, options.logStream));
  const request = requestAt(running);
  const server: TestServer = {
    ...running,
    config,
    async close() {
      await running.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
    request,
    admin: adminVia(request, running.adminUrl ? 'admin' : 'public'),
    async waitUntilReady(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        // A TLS listener's certificate is the test's own CA's, which fetch does not know: the probes answer on the admin listener too.
        const origin = running.url.startsWith('https:') && running.adminUrl ? running.adminUrl : running.url;
        const response = await fetch(`${origin}/healthz`).catch(() => undefined);
        if (response?.status === 200) return;
        // A short step: every test server waits here, and it is ready a few hundred ms after it listens.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error('the test server did not become ready');
    },
  };
  return server;
}

/** What every test server's configuration starts from: its port and issuer, a SQLite file in `dataDir`, the test Admin key. */
export function testEnvironment(port: number, dataDir: string): Record<string, string> {
  return {
    PORT: String(port),
    ISSUER: `http://127.0.0.1:${port}`,
    STORE_URL: `sqlite:${join(dataDir, 'arbiter.db')}`,
    SERVICE_ADMIN_API_KEY: ADMIN_KEY,
    POLICY_POLL_MIN_SECONDS: '1',
    POLICY_POLL_MAX_SECONDS: '1',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    // Every test client shares 127.0.0.1 with the others: the failure limit is tested on servers of its own.
    AUTH_FAILURE_LIMIT: '1000000',
    // Likewise their refused requests each get an audit entry (tests look for them); the budget is tested on servers of its own.
    AUDIT_UNAUTHENTICATED_LIMIT: '1000000',
    AUDIT_UNAUTHENTICATED_TOTAL_LIMIT: '1000000',
    // And their browsers' sign-ins: the budget is tested on a server of its own (sign-in-budget.test.ts).
    SIGN_INS_PER_ADDRESS: '1000000',
    // And their open registrations: the budget is tested on a server of its own (registration.test.ts).
    OPEN_REGISTRATIONS_PER_ADDRESS: '1000000',
  };
}

interface Closable {
  close(): Promise<void>;
}

const sharedFixtures = new Map<string, Promise<Closable>>();

/** Made once per key for the whole run, on first use; closed by the root hook (test/support/root.ts). */
export function sharedFixture<T extends Closable>(key: string, make: () => Promise<T>): Promise<T> {
  let fixture = sharedFixtures.get(key);
  if (!fixture) {
    fixture = make();
    sharedFixtures.set(key, fixture);
  }
  return fixture as Promise<T>;
}

export async function closeSharedFixtures(): Promise<void> {
  const fixtures = [...sharedFixtures.values()];
  sharedFixtures.clear();
  // One that failed to start has failed its tests already: there is nothing of it to close.
  await Promise.all(
    fixtures.map((fixture) =>
      fixture.then(
        (made) => made.close(),
        () => undefined,
      ),
    ),
  );
}

/**
 * A ready server for `env`, shared by every test file that asks for the same environment; a
 * file never closes it itself. Files that share one keep their records apart by naming them
 * after themselves, or by working in a tenant of their own (`inTenant`). A test that needs a
 * pristine server (exact counts, throttles, its store or its process) starts its own with
 * readyServer, and says why.
 */
export function withServer(env: Record<string, string> = {}): Promise<TestServer> {
  const key = JSON.stringify(Object.entries(env).sort(([a], [b]) => a.localeCompare(b)));
  return sharedFixture(`server ${key}`, () => readyServer(env));
}

/** startTestServer, resolved once /healthz answers 200. */
export async function readyServer(
  env: Record<string, string> = {},
  options: TestServerOptions = {},
): Promise<TestServer> {
  const server = await startTestServer(env, options);
  try {
    await server.waitUntilReady();
  } catch (error) {
    await server.close();
    throw error;
  }
  return server;
}

/**
 * The same server, seen from `tenant`: every request (Admin API included) names that tenant
 * unless it names one itself, so that a file's records, tokens and audit entries are its own.
 * The tenant comes into existence with the first record the Admin API writes for it.
 */
export function inTenant(server: TestServer, tenant: string): TestServer {
  const request: TestServer['request'] = (path, init = {}) =>
    server.request(path, {
      ...init,
      tenant: init.tenant ?? (new Headers(init.headers).has('X-Tenant-Id') ? undefined : tenant),
    });
  return { ...server, request, admin: adminVia(request, server.adminUrl ? 'admin' : 'public') };
}

/**
 * fetch against a server at `origins`, with the Admin API key when `admin` is set (or `key`), a
 * tenant, a JSON body, at the admin listener with `listener: 'admin'`.
 */
export function requestAt(origins: { url: string; adminUrl: string | null }): TestServer['request'] {
  return (path, init = {}) => {
    const headers = new Headers(init.headers);
    // An explicit `key`, else a key already among the headers, else the bootstrap key.
    if (init.key !== undefined) headers.set('X-Admin-API-Key', init.key);
    else if (init.admin && !headers.has('X-Admin-API-Key')) headers.set('X-Admin-API-Key', ADMIN_KEY);
    if (init.tenant) headers.set('X-Tenant-Id', init.tenant);
    let body = init.body;
    if (init.json !== undefined) {
      headers.set('Content-Type', 'application/json');
      body = JSON.stringify(init.json);
    }
    const origin = init.listener === 'admin' ? origins.adminUrl : origins.url;
    if (!origin) throw new Error('this test server has no admin listener (set ADMIN_PORT)');
    return fetch(`${origin}${path}`, { ...init, headers, body, redirect: 'manual' });
  };
}

/** An Admin API call made with `request` (at the admin listener when the server has one), its JSON answer parsed. */
export function adminVia(request: TestServer['request'], listener: 'public' | 'admin'): TestServer['admin'] {
  return async (method, path, json, headers = {}) => {
    const response = await request(`/admin/api${path}`, { method, json, admin: true, headers, listener });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
  };
}

/** Where freePort draws from: below the kernel's ephemeral range (ip_local_port_range, 32768–60999 here). */
const TEST_PORTS = { from: 10_000, to: 32_767 };

/**
 * A loopback port that is free now, so that the issuer URL can name it before the server starts.
 * Drawn at random below the ephemeral range, not asked of the kernel (port 0): between this probe
 * and the server's listen, an outbound connection of a parallel test worker (to OPA, PostgreSQL, a
 * server) may be given any free ephemeral port, this one included, and the listen would fail.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = TEST_PORTS.from + Math.floor(Math.random() * (TEST_PORTS.to - TEST_PORTS.from + 1));
    if (fetchMayUse(port) && (await bindsNow(port))) return port;
    if (attempt >= 100) throw new Error(`no free test port after ${attempt + 1} tries`);
  }
}

/**
 * The Fetch standard's "bad ports" that fall in TEST_PORTS: fetch (undici) and Chromium refuse to
 * connect to them ("bad port"), so a server listening there cannot be tested. A CI run drew 10080.
 */
const PORTS_FETCH_REFUSES = new Set([10080]);

/** Whether fetch and the browser connect to `port` (not one of the Fetch standard's bad ports). */
export function fetchMayUse(port: number): boolean {
  return !PORTS_FETCH_REFUSES.has(port);
}

function bindsNow(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}
