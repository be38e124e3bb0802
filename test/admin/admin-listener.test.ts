import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { eventually } from '../support/oauth.js';
import { ADMIN_KEY, freePort, withServer, type TestServer } from '../support/server.js';
import { entryPoint } from '../support/entry-point.js';

/**
 * ADMIN_PORT and BIND_ADDRESS: the Admin API, the console and /metrics leave the public listener
 * for one of their own (on 127.0.0.1 unless ADMIN_BIND_ADDRESS says otherwise), and the start-up
 * line names the addresses really bound.
 */
describe('A listener of its own for the admin surface (ADMIN_PORT)', function () {
  let server: TestServer;
  before(async function () {
    // ADMIN_PORT=0: any free port, as PORT=0 would (the server says which in adminUrl).
    server = await withServer({ ADMIN_PORT: '0' });
  });

  const publicGet = (path: string, init: Parameters<TestServer['request']>[1] = {}) =>
    server.request(path, { ...init, listener: 'public' });
  const adminGet = (path: string, init: Parameters<TestServer['request']>[1] = {}) =>
    server.request(path, { ...init, listener: 'admin' });

  it('listens for the admin surface on 127.0.0.1 by default, on another port than the public one', function () {
    expect(server.adminUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.adminUrl).not.to.equal(server.url);
    expect(server.listening.admin).to.equal(server.adminUrl);
    expect(server.config.adminBindAddress).to.equal('127.0.0.1');
  });

  it('serves nothing of the admin surface on the public port: a 404 like any path that names nothing', async function () {
    const nothing = await (await publicGet('/no-such-endpoint')).json();
    for (const path of [
      '/admin/api/clients',
      '/admin/api/openapi.json',
      '/ADMIN/API/clients',
      '/admin//api/clients',
      '/admin/api/%63lients',
      '/x/../admin/api/clients',
      '/admin',
      '/admin/',
      '/admin/assets/console.js',
      '/metrics',
      '/Metrics',
      '/metrics/',
    ]) {
      for (const init of [{ admin: true }, {}]) {
        const response = await publicGet(path, init);
        expect(response.status, path).to.equal(404);
        expect(await response.json(), path).to.deep.equal(nothing);
      }
    }
    const write = await publicGet('/admin/api/subjects', { method: 'POST', admin: true, json: { subjectId: 'x' } });
    expect(write.status).to.equal(404);
    // Not everything under /admin is the admin surface: a tenant named admin keeps its AuthZEN path form.
    const authzen = await publicGet('/admin/access/v1/evaluation', { method: 'POST', json: {} });
    expect(authzen.status).not.to.equal(404);
  });

  it('serves the Admin API, the console and /metrics on the admin port, the key still required', async function () {
    expect((await adminGet('/admin/api/clients', { admin: true })).status).to.equal(200);
    expect((await adminGet('/admin/api/clients')).status).to.equal(401);
    const page = await adminGet('/admin');
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/^text\/html/);
    const metrics = await adminGet('/metrics');
    expect(metrics.status).to.equal(200);
    expect(await metrics.text()).to.include('arbiter_http_request_duration_seconds');
  });

  it('serves no protocol endpoint on the admin port, and the protocol on the public one as before', async function () {
    for (const path of ['/.well-known/openid-configuration', '/token', '/jwks', '/authorize', '/no-such-endpoint'])
      expect((await adminGet(path)).status, path).to.equal(404);
    expect((await adminGet('/token', { method: 'POST' })).status).to.equal(404);
    const discovery = await publicGet('/.well-known/openid-configuration');
    expect(discovery.status).to.equal(200);
    expect(((await discovery.json()) as { issuer: string }).issuer).to.equal(server.config.issuer);
  });

  it('answers /healthz on both ports, and the policy bundle (its own token) on both', async function () {
    for (const get of [publicGet, adminGet]) {
      const health = await get('/healthz');
      expect(health.status).to.equal(200);
      expect(((await health.json()) as { status: string }).status).to.equal('ok');
      const headers = { Authorization: `Bearer ${server.config.policyBundleToken}` };
      expect((await get('/policy/bundle.tar.gz', { headers })).status).to.equal(200);
      expect((await get('/policy/bundle.tar.gz')).status).to.equal(401);
    }
  });

  it('keeps audit entries for Admin calls on the admin port, and none for refused admin paths on the public one', async function () {
    const marker = `/admin/api/clients/listener-audit-${Date.now()}`;
    expect((await publicGet(marker, { admin: true })).status).to.equal(404);
    expect((await adminGet(marker, { admin: true })).status).to.equal(404);
    const entries = await server.admin('GET', `/audit-logs?endpoint=${encodeURIComponent(marker)}`);
    expect(entries.body.totalElements, 'one entry: the call on the admin port').to.equal(1);
  });
});

describe('Bind addresses and the start-up line', function () {
  it('binds the public listener to BIND_ADDRESS only, and prints the addresses really bound', async function () {
    // 127.0.0.2 is a loopback address on Linux like 127.0.0.1, but a listener bound to it alone is not at 127.0.0.1.
    const [port, adminPort] = [await freePort(), await freePort()];
    const started = await startMain({ PORT: String(port), BIND_ADDRESS: '127.0.0.2', ADMIN_PORT: String(adminPort) });
    try {
      expect(started.listening).to.deep.equal({
        public: `http://127.0.0.2:${port}`,
        admin: `http://127.0.0.1:${adminPort}`,
      });
      expect(started.message).to.equal(
        `Arbiter is listening on http://127.0.0.2:${port}; the Admin API, the console and /metrics on http://127.0.0.1:${adminPort}`,
      );
      // Ready once the managed OPA has fetched its bundle, at the admin listener.
      await eventually(async () => (await fetch(`http://127.0.0.2:${port}/healthz`)).status === 200);
      await fetch(`http://127.0.0.1:${port}/healthz`).then(
        () => expect.fail('the public listener answered at 127.0.0.1'),
        (error: Error) => expect(String(error.cause)).to.match(/ECONNREFUSED/),
      );
      const clients = await fetch(`http://127.0.0.1:${adminPort}/admin/api/clients`, {
        headers: { 'X-Admin-API-Key': ADMIN_KEY },
      });
      expect(clients.status).to.equal(200);
    } finally {
      await started.stop();
    }
  });

  it('says "every interface" without BIND_ADDRESS, and that the admin surface is on the public listener without ADMIN_PORT', async function () {
    const port = await freePort();
    const started = await startMain({ PORT: String(port) });
    try {
      expect(started.listening.admin).to.equal(null);
      // Node binds :: where the host has IPv6 (which takes IPv4 too), else 0.0.0.0.
      expect(started.listening.public).to.be.oneOf([
        `http://[::]:${port} (every interface)`,
        `http://0.0.0.0:${port} (every interface)`,
      ]);
      expect(started.message).to.equal(
        `Arbiter is listening on ${started.listening.public}, the Admin API, the console and /metrics included`,
      );
    } finally {
      await started.stop();
    }
  });
});

describe('Listener settings are validated', function () {
  const invalid = (env: Record<string, string>, message: RegExp) =>
    expect(() => loadConfig({ SERVICE_ADMIN_API_KEY: ADMIN_KEY, ...env })).to.throw(ConfigError, message);

  it('refuses a bind address that is not an IP address, naming the variable', function () {
    invalid({ BIND_ADDRESS: 'localhost' }, /^invalid configuration: BIND_ADDRESS must be an IP address/);
    invalid({ BIND_ADDRESS: '10.0.0.300' }, /BIND_ADDRESS must be an IP address/);
    invalid({ ADMIN_PORT: '9001', ADMIN_BIND_ADDRESS: 'admin.internal' }, /ADMIN_BIND_ADDRESS must be an IP address/);
  });

  it('refuses an admin port equal to the public one, out of range, or an admin address without a port', function () {
    invalid({ PORT: '9000', ADMIN_PORT: '9000' }, /ADMIN_PORT must differ from PORT/);
    invalid({ ADMIN_PORT: '70000' }, /^invalid configuration: ADMIN_PORT must be <= 65535/);
    invalid({ ADMIN_PORT: 'nine' }, /ADMIN_PORT must be an integer/);
    invalid({ ADMIN_BIND_ADDRESS: '0.0.0.0' }, /ADMIN_BIND_ADDRESS needs ADMIN_PORT/);
  });

  it('takes the defaults: every interface, no admin listener; with ADMIN_PORT, 127.0.0.1 unless told', function () {
    const plain = loadConfig({});
    expect([plain.bindAddress, plain.adminPort, plain.adminBindAddress]).to.deep.equal([null, null, null]);
    const split = loadConfig({ ADMIN_PORT: '9001', BIND_ADDRESS: '::' });
    expect([split.bindAddress, split.adminPort, split.adminBindAddress]).to.deep.equal(['::', 9001, '127.0.0.1']);
    expect(loadConfig({ ADMIN_PORT: '9001', ADMIN_BIND_ADDRESS: '10.1.2.3' }).adminBindAddress).to.equal('10.1.2.3');
  });
});

interface StartedMain {
  listening: { public: string; admin: string | null };
  message: string;
  stop(): Promise<void>;
}

/** `npm start`'s entry point (src/main.ts) as a process of its own; resolves with its "listening" log line. */
async function startMain(env: Record<string, string>): Promise<StartedMain> {
  const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-listener-'));
  const child = spawn(process.execPath, entryPoint('main'), {
    env: {
      PATH: process.env.PATH ?? '',
      STORE_URL: `sqlite:${join(dataDir, 'arbiter.db')}`,
      SERVICE_ADMIN_API_KEY: ADMIN_KEY,
      LOG_LEVEL: 'info',
      // The start-up line is the subject, not the standby worker (a third copy of the code loading beside the test).
      WORKER_STANDBY: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stop = async () => {
    await stopProcess(child);
    rmSync(dataDir, { recursive: true, force: true });
  };
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  try {
    const line = await listeningLine(child);
    if (!line) throw new Error(`no "listening" line; stderr: ${stderr.slice(-2000)}`);
    return { listening: line.listening, message: line.msg, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The first JSON log line with `listening`, or null when the process ends without one. */
function listeningLine(child: ChildProcess): Promise<{ listening: StartedMain['listening']; msg: string } | null> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      if (!line.startsWith('{')) return;
      const parsed = JSON.parse(line) as { listening?: StartedMain['listening']; msg: string };
      if (parsed.listening) {
        resolve({ listening: parsed.listening, msg: parsed.msg });
        lines.close();
        // Keep reading what follows, so that a full pipe never blocks the server's logging.
        child.stdout!.resume();
      }
    });
    lines.on('close', () => resolve(null));
  });
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
