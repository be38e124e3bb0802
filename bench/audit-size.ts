/**
 * How much the SQLite store grows per client_credentials request (its audit entry, the token row
 * and whatever else the request writes): one server in this process, a warm-up, then
 * AUDIT_SIZE_REQUESTS requests; the database file is measured after a checkpoint before and after.
 * Prints bytes per request, and per table and index (SQLite's dbstat) what the requests added.
 *
 *   npm run bench:audit-size
 *   AUDIT_SIZE_REQUESTS=2000 bash scripts/run.sh tsx bench/audit-size.ts
 *
 * `env` of the server can be changed through the environment as for `npm start` (AUDIT_* settings).
 * A benchmark, not a test.
 */
import { statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { startTestServer } from '../test/support/server.js';
import { clientCredentials, confidentialClient } from '../test/support/oauth.js';

const REQUESTS = Number(process.env.AUDIT_SIZE_REQUESTS ?? 10_000);
const WARM_UP = 200;
const CONCURRENCY = 8;
const CLIENT = 'audit-size-machine';

/** Settings passed through to the server (AUDIT_RECORD_*, AUDIT_RETENTION_*). */
const passedEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => name.startsWith('AUDIT_') && !name.startsWith('AUDIT_SIZE_')),
) as Record<string, string>;

const server = await startTestServer(passedEnv);
try {
  await server.waitUntilReady();
  const file = server.config.storeUrl.replace(/^sqlite:/, '');
  const secret = await confidentialClient(server, CLIENT, { scopes: ['read', 'write'] });
  const run = async (count: number) => {
    let next = 0;
    const caller = async () => {
      while (next < count) {
        next += 1;
        const { status } = await clientCredentials(server, CLIENT, secret, { scope: 'read' });
        if (status !== 200) throw new Error(`client_credentials answered ${status}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, caller));
  };
  const measure = () => {
    const db = new Database(file);
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
      const freePages = db.pragma('freelist_count', { simple: true }) as number;
      const pageSize = db.pragma('page_size', { simple: true }) as number;
      const tables = new Map<string, number>();
      try {
        for (const row of db.prepare('SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name').all() as {
          name: string;
          bytes: number;
        }[])
          tables.set(row.name, row.bytes);
      } catch {
        // dbstat is not compiled in: the file's size alone.
      }
      return { size: statSync(file).size, used: statSync(file).size - freePages * pageSize, tables };
    } finally {
      db.close();
    }
  };
  await run(WARM_UP);
  const before = measure();
  const started = performance.now();
  await run(REQUESTS);
  // Let the batches of the last requests, and the counts written after them, reach the store.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const seconds = (performance.now() - started) / 1000;
  const after = measure();
  console.log(`${REQUESTS} client_credentials requests in ${seconds.toFixed(1)} s`);
  console.log(`file growth: ${((after.size - before.size) / REQUESTS).toFixed(0)} bytes per request`);
  console.log(`pages in use: ${((after.used - before.used) / REQUESTS).toFixed(0)} bytes per request`);
  const rows = [...after.tables]
    .map(([name, bytes]) => [name, (bytes - (before.tables.get(name) ?? 0)) / REQUESTS] as const)
    .filter(([, perRequest]) => perRequest >= 1)
    .sort((a, b) => b[1] - a[1]);
  for (const [name, perRequest] of rows) console.log(`  ${name}: ${perRequest.toFixed(0)} bytes per request`);
} finally {
  await server.close();
}
