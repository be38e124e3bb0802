/**
 * How every side of the cost curve (bench/curve.ts) is made: a SQLite store prepared as the
 * server prepares it (prepareStore: schema, sealing key, provider keys, the default policy pack)
 * and seeded through the store code, then a server process (WORKERS=1) started on it when the
 * runner asks (both sides of a dimension are seeded before either starts, so that they start
 * together), and the confidential clients the load authenticates as.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../src/config/index.js';
import { createLogger } from '../src/log/index.js';
import type { ClientRecord } from '../src/oauth/clients/records.js';
import { generateClientSecret, generatedSecretDigest } from '../src/oauth/clients/secrets.js';
import { prepareStore } from '../src/server.js';
import type { Sealer, Store } from '../src/store/index.js';
import { startServerProcess } from '../test/support/server-process.js';
import { freePort, testEnvironment } from '../test/support/server.js';

export const FORM = { 'Content-Type': 'application/x-www-form-urlencoded' };

/** A seeded store and the server that will run on it. */
export interface SeededServer {
  url: string;
  /** The SQLite file (read by the bench's own connection, e.g. for the purge's progress). */
  file: string;
  /** Starts the server and resolves once it is ready (its policy loaded), with its process id. */
  start(): Promise<number>;
  /** Stops the server, if started, and removes its store. */
  close(): Promise<void>;
}

/** A store `seed` fills (after prepareStore), for a server process with `env` beside the test environment. */
export async function seededServer(
  label: string,
  seed: (store: Store, sealer: Sealer) => Promise<void>,
  env: Record<string, string> = {},
): Promise<SeededServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-curve-'));
  const port = await freePort();
  const fullEnv = {
    ...testEnvironment(port, dataDir),
    WORKERS: '1',
    SERVICE_SECRETS_KEY: randomBytes(32).toString('base64url'),
    // CURVE_NODE_OPTIONS=--cpu-prof: profiles of the servers (written where they run, at their exit).
    ...(process.env.CURVE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.CURVE_NODE_OPTIONS } : {}),
    // CURVE_HEAP_GROWTH_PERCENT=0: the servers with V8's own old-generation growth (HEAP_GROWTH_PERCENT), to compare.
    ...(process.env.CURVE_HEAP_GROWTH_PERCENT ? { HEAP_GROWTH_PERCENT: process.env.CURVE_HEAP_GROWTH_PERCENT } : {}),
    ...env,
  };
  try {
    const { store, sealer } = await prepareStore(loadConfig(fullEnv), createLogger('silent'), { warn: false });
    try {
      await seed(store, sealer);
    } finally {
      await store.close();
    }
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  let child: ChildProcess | undefined;
  // Ready, not only up: the policy engine has loaded its bundle (a 503 otherwise).
  const ready = async (url: string) => (await fetch(`${url}/readyz`).catch(() => null))?.status === 200;
  return {
    url: `http://127.0.0.1:${port}`,
    file: join(dataDir, 'arbiter.db'),
    async start() {
      child = await startServerProcess({ port, dataDir, env: fullEnv, started: ready }).catch((error: unknown) => {
        throw new Error(`${label}: ${String(error)}`);
      });
      return child.pid!;
    },
    async close() {
      if (child && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child!.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A confidential client_secret_post client with a generated secret, as its record and its token request body. */
export function machineClient(id: number, clientId: string, tenantId: string | null, sealer: Sealer) {
  const secret = generateClientSecret();
  const now = new Date().toISOString();
  const record = {
    id,
    clientId,
    clientType: 'confidential',
    tokenEndpointAuthMethod: 'client_secret_post',
    clientSecret: generatedSecretDigest(sealer, secret),
    scopes: ['read'],
    enabled: true,
    tenantId,
    createdAt: now,
    updatedAt: now,
  } as ClientRecord;
  const body = new URLSearchParams({
    grant_type: 'client_credentials',
    scope: 'read',
    client_id: clientId,
    client_secret: secret,
  }).toString();
  return { record, body };
}
