/**
 * What one tenant's provider costs: N tenants (each with a client and its keys, seeded through the
 * store code), one server in this process (SQLite), then each tenant's first /t/<tenant>/token
 * (which builds its oidc-provider instance), the heap kept per 100 built tenants (after a full
 * garbage collection), and the latency of a request to a tenant already built against one to a
 * single tenant, one request at a time. Say the machine's load with the figures.
 *
 *   bash scripts/run.sh node --expose-gc --import tsx bench/tenant-cost.ts
 *   TENANT_COST_N=300 TENANT_COST_SNAPSHOT=/tmp/tenants.heapsnapshot bash scripts/run.sh node --expose-gc --import tsx bench/tenant-cost.ts
 *
 * With TENANT_COST_SNAPSHOT a heap snapshot is written once every tenant is built (then the run ends).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';
import { loadConfig } from '../src/config/index.js';
import { createLogger } from '../src/log/index.js';
import { clientsCollection, type ClientRecord } from '../src/oauth/clients/records.js';
import { generateClientSecret, generatedSecretDigest } from '../src/oauth/clients/secrets.js';
import { loadProviderSecrets } from '../src/oauth/keys.js';
import { prepareStore, startServer } from '../src/server.js';
import { registerTenant } from '../src/tenancy/index.js';
import { freePort, testEnvironment } from '../test/support/server.js';

const COUNT = Number(process.env.TENANT_COST_N ?? 200);
const SNAPSHOT = process.env.TENANT_COST_SNAPSHOT;
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc (see the header)');

/** Heap in use after two full collections (the second collects what the first's finalizers let go). */
function heapUsed(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

const dataDir = mkdtempSync(join(os.tmpdir(), 'arbiter-tenant-cost-'));
const config = loadConfig({
  ...testEnvironment(await freePort(), dataDir),
  SERVICE_SECRETS_KEY: randomBytes(32).toString('base64url'),
});
const bodies: string[] = [];
const seeded = await prepareStore(config, createLogger('silent'), { warn: false });
for (let index = 0; index < COUNT; index++) {
  const tenant = `cost-${index}`;
  await registerTenant(seeded.store, tenant);
  await loadProviderSecrets(seeded.store, seeded.sealer, tenant);
  const secret = generateClientSecret();
  const now = new Date().toISOString();
  await clientsCollection(seeded.store, tenant).insert({
    id: 1,
    clientId: 'svc',
    clientType: 'confidential',
    tokenEndpointAuthMethod: 'client_secret_post',
    clientSecret: generatedSecretDigest(seeded.sealer, secret),
    scopes: ['read'],
    enabled: true,
    tenantId: tenant,
    createdAt: now,
    updatedAt: now,
  } as ClientRecord);
  bodies.push(
    new URLSearchParams({
      grant_type: 'client_credentials',
      scope: 'read',
      client_id: 'svc',
      client_secret: secret,
    }).toString(),
  );
}
await seeded.store.close();

const server = await startServer(config, createLogger('silent'));
try {
  while ((await fetch(`${server.url}/readyz`)).status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
  const token = async (index: number) => {
    const answer = await fetch(`${server.url}/t/cost-${index}/token`, {
      method: 'POST',
      headers: FORM,
      body: bodies[index],
    });
    const text = await answer.text();
    if (answer.status !== 200) throw new Error(`tenant ${index}: ${answer.status} ${text}`);
  };
  /** Mean ms of one request to each of `indexes`, one at a time. */
  const timed = async (indexes: number[]) => {
    const started = performance.now();
    for (const index of indexes) await token(index);
    return (performance.now() - started) / indexes.length;
  };
  const others = Array.from({ length: COUNT - 1 }, (_, offset) => offset + 1);
  // Tenant 0 built and warm: what every later figure is compared with.
  await timed([0, 0, 0]);
  const before = heapUsed();
  const build = await timed(others);
  const after = heapUsed();
  if (SNAPSHOT) {
    writeHeapSnapshot(SNAPSHOT);
    console.log(`heap snapshot: ${SNAPSHOT}`);
  } else {
    const built = await timed(others);
    const single = await timed(others.map(() => 0));
    console.log(
      `${COUNT} tenants, load ${os
        .loadavg()
        .map((load) => load.toFixed(2))
        .join(' ')}: first request (builds the provider) ${build.toFixed(1)} ms; ` +
        `a built tenant ${built.toFixed(1)} ms against one tenant ${single.toFixed(1)} ms; ` +
        `heap kept per 100 tenants ${((((after - before) / others.length) * 100) / 1e6).toFixed(1)} MB`,
    );
  }
} finally {
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
