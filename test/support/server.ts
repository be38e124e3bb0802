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
  /** fetch against the server, with the Admin API key when `admin` is set. */
  request(path: string, init?: RequestInit & { admin?: boolean; json?: unknown; tenant?: string }): Promise<Response>;
  admin(method: string, path: string, json?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>;
  waitUntilReady(timeoutMs?: number): Promise<void>;
}

export interface TestServerOptions {
  /** Where the server's JSON log lines go (default stdout); set LOG_LEVEL in `env` for there to be any. */
  logStream?: DestinationStream;
}

/**
 * Starts a real Arbiter (real HTTP, real store, real managed OPA) on a free loopback port.
 * `env` overrides configuration exactly as environment variables do in production.
 */
export async function startTestServer(env: Record<string, string> = {}, options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-test-'));
  const port = await freePort();
  const config = loadConfig({
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
    ...env,
  });
  const running = await startServer(config, createLogger(config.logLevel, options.logStream));
  const server: TestServer = {
    ...running,
    config,
    async close() {
      await running.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
    request(path, init = {}) {
      const headers = new Headers(init.headers);
      if (init.admin) headers.set('X-Admin-API-Key', ADMIN_KEY);
      if (init.tenant) headers.set('X-Tenant-Id', init.tenant);
      let body = init.body;
      if (init.json !== undefined) {
        headers.set('Content-Type', 'application/json');
        body = JSON.stringify(init.json);
      }
      return fetch(`${running.url}${path}`, { ...init, headers, body, redirect: 'manual' });
    },
    async admin(method, path, json, headers = {}) {
      const response = await server.request(`/admin/api${path}`, { method, json, admin: true, headers });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    },
    async waitUntilReady(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const response = await fetch(`${running.url}/healthz`).catch(() => undefined);
        if (response?.status === 200) return;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      throw new Error('the test server did not become ready');
    },
  };
  return server;
}

let shared: Promise<TestServer> | undefined;

/** One ready server shared by the tests that need no special configuration; closed by the root hook. */
export function sharedServer(): Promise<TestServer> {
  shared ??= startTestServer().then(async (server) => {
    await server.waitUntilReady();
    return server;
  });
  return shared;
}

export async function closeSharedServer(): Promise<void> {
  if (shared) await (await shared).close();
  shared = undefined;
}

/** A loopback port that is free now, so that the issuer URL can name it before the server starts. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
