import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { freePort } from '../support/server.js';
import { startServerProcess } from '../support/server-process.js';

const REQUESTS = 20_000;
const CONCURRENCY = 32;
const MAX_GROWTH_MB = 50;

function rssMegabytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? NaN) / 1024;
}

/** Sends `count` discovery requests, each naming a tenant id never seen before. */
async function freshTenants(url: string, prefix: string, count: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const n = next++;
      const response = await fetch(`${url}/.well-known/openid-configuration`, {
        headers: { 'X-Tenant-Id': `${prefix}-${n}` },
      });
      await response.arrayBuffer();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return statuses;
}

describe('Tenant ids cannot grow memory', function () {
  this.timeout(180_000);
  let child: ChildProcess;
  let dataDir: string;
  let url: string;

  before(async function () {
    dataDir = mkdtempSync(join(tmpdir(), 'arbiter-tenants-'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    // Its own process, so that its memory is measured alone.
    child = await startServerProcess({ port, dataDir });
  });
  after(async function () {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`answers ${REQUESTS} made-up tenant ids with 400 and grows RSS by less than ${MAX_GROWTH_MB} MB`, async function () {
    // Warm-up: lazily built code paths and buffers are not what is measured.
    await freshTenants(url, 'warm', 2_000);
    const before = rssMegabytes(child.pid!);
    const statuses = await freshTenants(url, 'fresh', REQUESTS);
    const after = rssMegabytes(child.pid!);
    expect([...statuses.keys()]).to.deep.equal([400]);
    expect(after - before, `RSS ${before.toFixed(0)} MB → ${after.toFixed(0)} MB`).to.be.below(MAX_GROWTH_MB);
  });

  it('runs with a young generation of at most 16 MB (--max-semi-space-size=8, src/workers/node-flags.ts)', async function () {
    // After the requests above: V8 grows the young generation under load, up to ~100 MB by default here.
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const line = metrics
      .split('\n')
      .find((each) => each.startsWith('arbiter_nodejs_heap_space_size_total_bytes{space="new"}'));
    const newSpaceMb = Number(line?.split(' ').at(-1)) / 1024 / 1024;
    expect(newSpaceMb, line).to.be.at.most(17);
  });
});
