/**
 * Cost curves: how a request's cost grows with one dimension of scale. Each dimension runs two
 * servers side by side (separate processes, WORKERS=1, SQLite), one seeded small and one large,
 * in alternating rounds, and prints the figures of each and their ratios (large/small, the median
 * of the per-round ratios). Seeding goes through the store code (bulk insertMany), not HTTP.
 *
 *   npm run bench:curve
 *   CURVE_DIMENSIONS=audit CURVE_LARGE=200000 npm run bench:curve
 *
 * Dimensions (a table: add one with its seed and its measure):
 * - purge: expired tokens, purged while /token is under a steady load; the worst /token latency
 *   from the purge's start to its end (goal ≤ 250 ms at 1M).
 * - audit: audit entries; the console's page (newest first, the console's own reads left out),
 *   the same filtered by endpoint, and five pages deep by cursor, while /token is under load; the
 *   slowest page (goal ≤ 500 ms at 1M) and the worst /token latency meanwhile (goal ≤ 250 ms).
 *
 * Say the machine's load (uptime) with the figures: the machine is shared. A benchmark, not a test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import bcrypt from 'bcryptjs';
import { OIDC_COLLECTION } from '../adapters/oidc/index.js';
import { AUDIT_LOG_COLLECTION } from '../src/audit/log.js';
import { openStore } from '../src/store/open.js';
import { DEFAULT_TENANT, type Store, type StoredDoc, type TenantCollection } from '../src/store/index.js';
import { ADMIN_KEY, freePort } from '../test/support/server.js';
import { startServerProcess } from '../test/support/server-process.js';
import { basic, FORM } from '../test/support/oauth.js';
import { BCRYPT_COST } from './servers.js';
import { percentile } from './stats.js';

const LARGE = Number(process.env.CURVE_LARGE ?? 1_000_000);
const SMALL = Number(process.env.CURVE_SMALL ?? 1_000);
const ROUNDS = Number(process.env.CURVE_ROUNDS ?? 3);
/** Concurrent /token callers of the steady load beside what is measured. */
const LOAD_CONNECTIONS = Number(process.env.CURVE_CONNECTIONS ?? 4);
const CLIENT = { id: 'curve-machine', secret: 'curve-machine-secret-0123456789' };
/** The purge dimension's servers purge this long after they start. */
const PURGE_AFTER_SECONDS = 20;

type Figures = Record<string, number>;

interface CurveServer {
  url: string;
  file: string;
  process: ChildProcess;
  dataDir: string;
  /** performance.now() when it answered first. */
  startedAt: number;
}

interface Dimension {
  name: string;
  /** What `size` counts, for the report. */
  unit: string;
  env?: Record<string, string>;
  /** Fills the store (opened on the server's file, before the server starts) with `size` of the unit. */
  seed(store: Store, size: number): Promise<void>;
  /** One round's figures of one server (ms); `all`: both servers of the dimension (the other side's state may end the window). */
  measure(server: CurveServer, all: CurveServer[]): Promise<Figures>;
  /** How many rounds make sense (a purge happens once). */
  rounds: number;
  /** Both servers measured at once (a purge starts at a time of its own, not when a round does). */
  together?: boolean;
}

const DIMENSIONS: Dimension[] = [
  {
    name: 'purge',
    unit: 'expired tokens',
    env: { PURGE_INTERVAL_SECONDS: String(PURGE_AFTER_SECONDS) },
    rounds: 1,
    together: true,
    seed: (store, size) =>
      seedInBulk(store.collection(OIDC_COLLECTION, DEFAULT_TENANT), size, (n) => ({
        id: `AccessToken:${n.toString(16).padStart(43, '0')}`,
        model: 'AccessToken',
        clientId: `client-${n % 1000}`,
        grantId: `grant-${n}`,
        payload: { kind: 'AccessToken', scope: 'read', exp: 1, iat: 1, jti: `${n}` },
        expiresAt: Date.now() - 60_000,
      })),
    // Both sides over the same window, until the large side's purge ends: the worst latency of a
    // window grows with its length on a shared machine, so the small side (no purge to speak of)
    // is the figure without a purge to compare with.
    measure: async (server, all) => {
      const load = steadyLoad(server.url);
      const purgeFrom = server.startedAt + (PURGE_AFTER_SECONDS - 2) * 1000;
      while (all.some((each) => expiredRowsLeft(each.file)) || performance.now() < purgeFrom + 4000) await pause(250);
      const purgeMs = performance.now() - purgeFrom;
      const { latencies, failures } = await load.stop();
      return {
        ...summarize(
          'token',
          latencies.filter((each) => each.at >= purgeFrom),
        ),
        'token non-200': failures.filter((at) => at >= purgeFrom).length,
        'purge window': purgeMs,
      };
    },
  },
  {
    name: 'audit',
    unit: 'audit entries',
    rounds: ROUNDS,
    seed: async (store, size) => {
      const started = Date.now() - 30 * 86_400_000;
      await seedInBulk(store.collection(AUDIT_LOG_COLLECTION, DEFAULT_TENANT), size, (n) => {
        const endpoint = ['/token', '/token', '/token', '/introspect', '/admin/api/clients'][n % 5];
        return {
          id: n + 1,
          createdAt: new Date(started + Math.floor((n * 30 * 86_400_000) / size)).toISOString(),
          method: endpoint === '/admin/api/clients' ? 'GET' : 'POST',
          endpoint,
          outcome: n % 7 === 0 ? 'denied' : 'success',
          tenantId: null,
          clientId: `client-${n % 100}`,
          subjectId: null,
          requestSummary: { status: n % 7 === 0 ? 400 : 200 },
          policyDecision: { point: 'token', allow: n % 7 !== 0 },
          policyInput: { client: { id: `client-${n % 100}` }, request: { grant_type: 'client_credentials' } },
          ...(endpoint === '/admin/api/clients' ? { consoleRead: true } : {}),
        };
      });
      // New entries take ids after the seeded ones.
      await store.nextSequence(AUDIT_LOG_COLLECTION.name, size);
    },
    measure: async (server) => {
      const load = steadyLoad(server.url);
      await pause(1000);
      const pages: number[] = [];
      const base = '/admin/api/audit-logs?size=20&sort=id,desc&hideConsoleReads=true';
      for (let read = 0; read < 3; read++) {
        pages.push((await timedAdmin(server.url, base)).ms);
        pages.push((await timedAdmin(server.url, `${base}&endpoint=/introspect`)).ms);
      }
      let cursor: string | null = null;
      for (let page = 0; page < 5; page++) {
        const { ms, body } = await timedAdmin(server.url, `${base}${cursor ? `&cursor=${cursor}` : ''}`);
        pages.push(ms);
        cursor = (body as { nextCursor: string | null }).nextCursor;
      }
      const { latencies, failures } = await load.stop();
      return {
        ...summarize('token', latencies),
        'token non-200': failures.length,
        'page max': Math.max(...pages),
        'page p50': percentile(sorted(pages), 50),
      };
    },
  },
];

async function main(): Promise<void> {
  const chosen = (process.env.CURVE_DIMENSIONS ?? DIMENSIONS.map((dimension) => dimension.name).join(',')).split(',');
  console.log(
    `load before: ${os
      .loadavg()
      .map((load) => load.toFixed(2))
      .join(' ')}`,
  );
  for (const dimension of DIMENSIONS.filter((each) => chosen.includes(each.name))) await runDimension(dimension);
  console.log(
    `load after: ${os
      .loadavg()
      .map((load) => load.toFixed(2))
      .join(' ')}`,
  );
}

/** The shared runner: seed both, start both, rounds alternating small and large, then the ratios. */
async function runDimension(dimension: Dimension): Promise<void> {
  const sizes = { small: SMALL, large: LARGE };
  const figures: Record<'small' | 'large', Figures[]> = { small: [], large: [] };
  const servers: Partial<Record<'small' | 'large', CurveServer>> = {};
  const dataDirs = { small: '', large: '' };
  try {
    // Both seeded before either starts, so that they start together.
    for (const side of ['small', 'large'] as const) {
      dataDirs[side] = mkdtempSync(join(os.tmpdir(), `arbiter-curve-${dimension.name}-`));
      const started = Date.now();
      const store = await openStore(`sqlite:${join(dataDirs[side], 'arbiter.db')}`);
      await dimension.seed(store, sizes[side]);
      await store.close();
      console.log(
        `${dimension.name}: seeded ${sizes[side]} ${dimension.unit} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
    }
    for (const side of ['small', 'large'] as const) {
      const file = join(dataDirs[side], 'arbiter.db');
      servers[side] = { ...(await startServer(dataDirs[side], dimension.env)), file, dataDir: dataDirs[side] };
      await createClient(servers[side].url);
    }
    for (let round = 0; round < dimension.rounds; round++) {
      if (dimension.together) {
        const [small, large] = await Promise.all([
          dimension.measure(servers.small!, [servers.small!, servers.large!]),
          dimension.measure(servers.large!, [servers.small!, servers.large!]),
        ]);
        figures.small.push(small);
        figures.large.push(large);
        continue;
      }
      for (const side of round % 2 === 0 ? (['small', 'large'] as const) : (['large', 'small'] as const))
        figures[side].push(await dimension.measure(servers[side]!, [servers.small!, servers.large!]));
    }
  } finally {
    for (const server of Object.values(servers)) await stopServer(server);
    for (const dataDir of Object.values(dataDirs)) if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
  report(dimension, sizes, figures);
}

function report(
  dimension: Dimension,
  sizes: { small: number; large: number },
  figures: Record<'small' | 'large', Figures[]>,
): void {
  console.log(`\n${dimension.name}: ${sizes.small} → ${sizes.large} ${dimension.unit} (${dimension.rounds} round(s))`);
  for (const name of Object.keys(figures.small[0]!)) {
    const small = figures.small.map((each) => each[name]!);
    const large = figures.large.map((each) => each[name]!);
    const ratios = sorted(small.map((value, round) => large[round]! / Math.max(value, 0.001)));
    console.log(
      `  ${name.padEnd(12)} small ${small.map(ms).join(' ')}  large ${large.map(ms).join(' ')}  ratio ${percentile(ratios, 50).toFixed(2)}x`,
    );
  }
}

/** `count` documents made by `make`, in inserts of 1,000 (one transaction each on SQLite). */
async function seedInBulk<T extends StoredDoc>(
  into: TenantCollection<T>,
  count: number,
  make: (n: number) => T,
): Promise<void> {
  for (let from = 0; from < count; from += 1_000)
    await into.insertMany(Array.from({ length: Math.min(1_000, count - from) }, (_, index) => make(from + index)));
}

/**
 * Whether expired rows are left in the token collection, read by a connection of the bench's own:
 * one row through the expiry index (a COUNT of a million would hold the bench's own loop, and
 * every latency it measures, for as long).
 */
function expiredRowsLeft(file: string): boolean {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT 1 FROM c_oidc WHERE expires_at <= ? LIMIT 1').get(Date.now()) !== undefined;
  } finally {
    db.close();
  }
}

/** LOAD_CONNECTIONS callers asking for tokens one after the other, each answer's latency kept. */
function steadyLoad(url: string) {
  /** When each request was sent (performance.now()) and how long its answer took, ms. */
  const latencies: { at: number; ms: number }[] = [];
  /** When each request that was not answered 200 was sent. */
  const failures: number[] = [];
  const reasons = new Set<string>();
  let running = true;
  const caller = async () => {
    while (running) {
      const sent = performance.now();
      const answer = await fetch(`${url}/token`, {
        method: 'POST',
        headers: { ...FORM, authorization: basic(CLIENT.id, CLIENT.secret) },
        body: 'grant_type=client_credentials&scope=read',
      }).catch((error: unknown) => ({ status: 0, text: async () => String(error) }));
      const body = await answer.text();
      if (answer.status !== 200) {
        // Counted and shown once per reason: the figures say how many, the run goes on.
        failures.push(sent);
        if (!reasons.has(body)) console.log(`/token answered ${answer.status}: ${body.slice(0, 300)}`);
        reasons.add(body);
        continue;
      }
      latencies.push({ at: sent, ms: performance.now() - sent });
    }
  };
  const callers = Promise.all(Array.from({ length: LOAD_CONNECTIONS }, caller));
  return {
    async stop() {
      running = false;
      await callers;
      return { latencies, failures };
    },
  };
}

function summarize(name: string, latencies: { ms: number }[]): Figures {
  const ordered = sorted(latencies.map((each) => each.ms));
  return {
    [`${name} max`]: percentile(ordered, 100),
    [`${name} p99`]: percentile(ordered, 99),
    [`${name} p50`]: percentile(ordered, 50),
  };
}

async function timedAdmin(url: string, path: string): Promise<{ ms: number; body: unknown }> {
  const sent = performance.now();
  const answer = await fetch(`${url}${path}`, { headers: { 'x-admin-api-key': ADMIN_KEY } });
  const body: unknown = await answer.json();
  if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}: ${JSON.stringify(body)}`);
  return { ms: performance.now() - sent, body };
}

async function startServer(
  dataDir: string,
  env: Record<string, string> = {},
): Promise<{ url: string; process: ChildProcess; startedAt: number }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = await startServerProcess({
    port,
    dataDir,
    env: { ISSUER: url, AUTH_FAILURE_LIMIT: '1000000', ...env },
  });
  return { url, process: child, startedAt: performance.now() };
}

async function stopServer(server: CurveServer): Promise<void> {
  const exited = new Promise((resolve) => server.process.once('exit', resolve));
  server.process.kill('SIGTERM');
  await exited;
}

async function createClient(url: string): Promise<void> {
  const record = {
    clientId: CLIENT.id,
    clientType: 'confidential',
    clientSecret: bcrypt.hashSync(CLIENT.secret, BCRYPT_COST),
    scopes: ['read'],
  };
  const response = await fetch(`${url}/admin/api/clients`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-api-key': ADMIN_KEY },
    body: JSON.stringify(record),
  });
  if (response.status !== 201) throw new Error(`client not created: ${response.status} ${await response.text()}`);
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const ms = (value: number) => `${value.toFixed(1)}`;

await main();
