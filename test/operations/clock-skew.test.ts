import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { globSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ClockSkew } from '../../src/store/index.js';
import { sharedMongoTestServer } from '../store/mongo-server.js';
import { freePort } from '../support/server.js';
import { startServerProcess } from '../support/server-process.js';

/**
 * A node whose clock runs ahead of the others issues tokens from the future; one behind accepts
 * tokens expired elsewhere. Each node compares its clock with the store server's: a skew beyond
 * CLOCK_SKEW_LIMIT_SECONDS is logged, exported and makes /readyz 503. The node here runs under
 * libfaketime (Debian's, scripts/install-faketime.sh), two minutes ahead of FerretDB's clock.
 */
describe('Clock skew against the store server', function () {
  this.timeout(180_000);
  let child: ChildProcess | undefined;
  let dataDir: string | undefined;
  let output = '';

  afterEach(async function () {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child!.once('exit', resolve));
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('makes /readyz 503 naming the skew, logs it and exports arbiter_clock_skew_seconds', async function () {
    const [library] = globSync('/usr/lib/*/faketime/libfaketime.so.1');
    if (!library) throw new Error('libfaketime is missing: run scripts/install-faketime.sh');
    const mongo = await sharedMongoTestServer('sqlite');
    const dir = (dataDir = mkdtempSync(join(tmpdir(), 'arbiter-clock-')));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    child = await startServerProcess({
      port,
      dataDir: dir,
      env: {
        STORE_URL: mongo.uri(mongo.freshDatabase()),
        LD_PRELOAD: library,
        FAKETIME: '+120s',
        // Node's timers run on the monotonic clock: only the wall clock is moved.
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
        LOG_LEVEL: 'info',
      },
      onOutput: (chunk) => (output += chunk),
      // Started once it answers readiness at all (it will not be ready).
      started: async (at) => (await fetch(`${at}/readyz`).catch(() => undefined)) !== undefined,
    });
    let body: Record<string, unknown>;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ready = await fetch(`${url}/readyz`);
      body = (await ready.json()) as Record<string, unknown>;
      if (ready.status === 503 && typeof body.clock === 'string') break;
      if (Date.now() > deadline) throw new Error(`/readyz never named the clock: ${JSON.stringify(body)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(body.status).to.equal('unavailable');
    expect(body.clock).to.match(/clock is 1[12][0-9] s ahead of the store's/);
    expect(output).to.match(/clock is 1[12][0-9] s ahead of the store's/);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const skew = /^arbiter_clock_skew_seconds ([0-9.e+-]+)$/m.exec(metrics)?.[1];
    expect(Number(skew), metrics.slice(0, 200)).to.be.within(110, 130);
  });

  it('says nothing while the clocks agree (unit: a store clock within the limit, then beyond, then back)', async function () {
    let offsetMs = 0;
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const clock = new ClockSkew({ clock: async () => Date.now() - offsetMs }, 30_000, log);
    await clock.check();
    expect(clock.problem).to.equal(null);
    expect(Math.abs(clock.seconds!)).to.be.below(1);
    offsetMs = -45_000;
    await clock.check();
    expect(clock.problem).to.match(/45 s behind the store's/);
    await clock.check();
    offsetMs = 0;
    await clock.check();
    expect(clock.problem).to.equal(null);
    expect(lines.filter((line) => line.includes('behind the store'))).to.have.length(1);
    expect(lines.filter((line) => line.includes('agrees with the store'))).to.have.length(1);
  });
});
