/**
 * The cost curve's store dimensions (bench/curve.ts), each with /token under a steady load beside
 * what is measured, CURVE_SMALL (1,000) against CURVE_LARGE (1,000,000) rows:
 *
 * - purge: expired tokens, purged PURGE_AFTER_SECONDS after the servers start; both sides over
 *   the same window, until the large side's purge ends (the worst latency of a window grows with
 *   its length on a shared machine, so the small side, with no purge to speak of, is the figure
 *   without a purge to compare with);
 * - audit: audit entries; the console's page (newest first, the console's own reads left out),
 *   the same filtered by endpoint, and five pages deep by cursor.
 *
 * Seeded through the store code in inserts of 1,000 (one transaction each on SQLite).
 */
import Database from 'better-sqlite3';
import { OIDC_COLLECTION } from '../adapters/oidc/collection.js';
import { AUDIT_LOG_COLLECTION } from '../src/audit/collections.js';
import { clientsCollection } from '../src/oauth/clients/records.js';
import { DEFAULT_TENANT, type Sealer, type Store, type StoredDoc, type TenantCollection } from '../src/store/index.js';
import { ADMIN_KEY } from '../test/support/server.js';
import type { Beside, CurveDimension, CurveSide, Size } from './curve.js';
import { FORM, machineClient, seededServer } from './curve-server.js';

const ROWS = {
  small: Number(process.env.CURVE_SMALL ?? 1_000),
  large: Number(process.env.CURVE_LARGE ?? 1_000_000),
};
/** The purge dimension's servers purge this long after they start. */
const PURGE_AFTER_SECONDS = 20;
const AUDIT_PAGE = '/admin/api/audit-logs?size=20&sort=id,desc&hideConsoleReads=true';

/** A side on a store `seed` filled, with the client its steady load authenticates as. */
async function storeSide(
  dimension: string,
  size: Size,
  unit: string,
  seed: (store: Store, rows: number) => Promise<void>,
  beside: (server: { url: string; file: string; startedAt: number }) => Promise<Beside>,
  env: Record<string, string> = {},
): Promise<CurveSide> {
  let body = '';
  const server = await seededServer(
    `${dimension} ${size}`,
    async (store: Store, sealer: Sealer) => {
      await seed(store, ROWS[size]);
      const client = machineClient(1, 'curve-machine', null, sealer);
      await clientsCollection(store, DEFAULT_TENANT).insert(client.record);
      body = client.body;
    },
    env,
  );
  let startedAt = NaN;
  return {
    label: `${ROWS[size].toLocaleString('en')} ${unit}`,
    job: { url: `${server.url}/token`, method: 'POST', headers: FORM, body },
    beside: () => beside({ ...server, startedAt }),
    async start() {
      const pid = await server.start();
      startedAt = performance.now();
      return pid;
    },
    close: server.close,
  };
}

const seedExpiredTokens = (store: Store, rows: number) =>
  seedInBulk(store.collection(OIDC_COLLECTION, DEFAULT_TENANT), rows, (n) => ({
    id: `AccessToken:${n.toString(16).padStart(43, '0')}`,
    model: 'AccessToken',
    clientId: `client-${n % 1000}`,
    grantId: `grant-${n}`,
    payload: { kind: 'AccessToken', scope: 'read', exp: 1, iat: 1, jti: `${n}` },
    expiresAt: Date.now() - 60_000,
  }));

/** The window starts just before the purge and ends once no expired row is left (and not before 4 s). */
async function purgeWindow(server: { file: string; startedAt: number }): Promise<Beside> {
  const from = server.startedAt + (PURGE_AFTER_SECONDS - 2) * 1000;
  while (expiredRowsLeft(server.file) || performance.now() < from + 4000) await pause(250);
  return { from };
}

async function seedAuditEntries(store: Store, rows: number): Promise<void> {
  const started = Date.now() - 30 * 86_400_000;
  await seedInBulk(store.collection(AUDIT_LOG_COLLECTION, DEFAULT_TENANT), rows, (n) => {
    const endpoint = ['/token', '/token', '/token', '/introspect', '/admin/api/clients'][n % 5];
    return {
      id: n + 1,
      createdAt: new Date(started + Math.floor((n * 30 * 86_400_000) / rows)).toISOString(),
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
  await store.nextSequence(AUDIT_LOG_COLLECTION.name, rows);
}

/** The console's pages, read one after the other a second into the steady load. */
async function auditPages(server: { url: string }): Promise<Beside> {
  await pause(1000);
  const page: number[] = [];
  for (let read = 0; read < 3; read++) {
    page.push((await timedAdmin(server.url, AUDIT_PAGE)).ms);
    page.push((await timedAdmin(server.url, `${AUDIT_PAGE}&endpoint=/introspect`)).ms);
  }
  let cursor: string | null = null;
  for (let deep = 0; deep < 5; deep++) {
    const { ms, body } = await timedAdmin(server.url, `${AUDIT_PAGE}${cursor ? `&cursor=${cursor}` : ''}`);
    page.push(ms);
    cursor = (body as { nextCursor: string | null }).nextCursor;
  }
  return { timings: { page } };
}

/** `count` documents made by `make`, in inserts of 1,000. */
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

async function timedAdmin(url: string, path: string): Promise<{ ms: number; body: unknown }> {
  const sent = performance.now();
  const answer = await fetch(`${url}${path}`, { headers: { 'x-admin-api-key': ADMIN_KEY } });
  const body: unknown = await answer.json();
  if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}: ${JSON.stringify(body)}`);
  return { ms: performance.now() - sent, body };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const purgeAndAudit: CurveDimension[] = [
  {
    name: 'purge',
    kind: 'latency',
    goals: [{ figure: '/token max ms', of: 'large', atMost: 250 }],
    // A purge happens once, when it will: both sides are measured at once, in one round.
    together: true,
    seed: (size) =>
      storeSide('purge', size, 'expired tokens', seedExpiredTokens, purgeWindow, {
        PURGE_INTERVAL_SECONDS: String(PURGE_AFTER_SECONDS),
      }),
  },
  {
    name: 'audit',
    kind: 'latency',
    goals: [
      { figure: 'page max ms', of: 'large', atMost: 500 },
      { figure: '/token max ms', of: 'large', atMost: 250 },
    ],
    seed: (size) => storeSide('audit', size, 'audit entries', seedAuditEntries, auditPages),
  },
];
