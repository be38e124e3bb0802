import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { eventually } from '../support/oauth.js';
import { ADMIN_KEY, freePort } from '../support/server.js';

describe('Runtime and build', function () {
  it('runs on a supported Node.js LTS (22 or later), whatever Node the machine has', function () {
    const major = Number(process.versions.node.split('.')[0]);
    expect(major, `the suite runs on Node ${process.version}`).to.be.at.least(22);
  });

  it("`npx arbiter` runs on the project's Node without npm's EBADENGINE warnings, whatever Node runs npm", function () {
    this.timeout(120_000);
    // The machine's own Node and npm first (Node 20 on these machines), not the one runtime.sh put on PATH.
    const machinePath = (process.env.PATH ?? '')
      .split(':')
      .filter((dir) => !dir.includes('/.bin/node-'))
      .join(':');
    // A fresh npx cache: npx links this package into it on first use, and that is when npm checks `engines`.
    const cache = mkdtempSync(join(tmpdir(), 'arbiter-npx-'));
    try {
      const run = spawnSync('npx', ['--yes', 'arbiter', 'schema-version'], {
        env: {
          PATH: machinePath,
          HOME: process.env.HOME ?? '',
          npm_config_cache: cache,
          npm_config_offline: 'true',
          npm_config_update_notifier: 'false',
          STORE_URL: 'sqlite::memory:',
        },
        encoding: 'utf8',
        timeout: 110_000,
      });
      const output = `${run.stdout}${run.stderr}`;
      expect(output).not.to.contain('EBADENGINE');
      expect(run.status, output).to.equal(0);
      expect(output).to.match(/"release":\d+/);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });

  it('`npm start` serves from the compiled dist/ (the console too) on a supported Node, without the unsupported-runtime warning', async function () {
    this.timeout(180_000);
    const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-start-'));
    const port = await freePort();
    const child = spawn('bash', ['scripts/start.sh'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        PORT: String(port),
        STORE_URL: `sqlite:${join(dataDir, 'arbiter.db')}`,
        SERVICE_ADMIN_API_KEY: ADMIN_KEY,
        LOG_LEVEL: 'info',
        // What is served from dist/ is the subject, not the standby worker (one more process loading beside the test).
        WORKER_STANDBY: 'false',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    try {
      await eventually(async () => {
        if (child.exitCode !== null) throw new Error(`npm start ended: ${output.slice(-2000)}`);
        return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status === 200;
      }, 150_000);
      // start.sh ends by exec'ing node on the build: the process it started is that node.
      const commandLine = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
      expect(commandLine).to.include('dist/src/main.js');
      const nodeVersion = execFileSync(readlinkSync(`/proc/${child.pid}/exe`), ['--version'], { encoding: 'utf8' });
      expect(Number(nodeVersion.replace(/^v/, '').split('.')[0]), nodeVersion).to.be.at.least(22);
      expect(output).to.contain('Arbiter is listening');
      // The console as `npm run build` bundled it into dist/console/ (nothing is compiled at run time).
      expect((await fetch(`http://127.0.0.1:${port}/admin/assets/console.js`)).status).to.equal(200);
      expect(output).not.to.contain('Unsupported runtime');
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
