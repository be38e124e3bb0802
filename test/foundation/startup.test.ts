import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { ConfigError, configWarnings, loadConfig } from '../../src/config/index.js';
import { clientCredentials, confidentialClient, eventually } from '../support/oauth.js';
import { freePort, withServer, startTestServer } from '../support/server.js';
import { entryPoint } from '../support/entry-point.js';

/** Runs the server's entry point (src/main.ts) with the given environment and returns how it ended. */
function start(env: Record<string, string>) {
  const result = spawnSync(process.execPath, entryPoint('main'), {
    env: { PATH: process.env.PATH ?? '', STORE_URL: 'sqlite::memory:', ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, stderr: result.stderr.trim() };
}

describe('Start-up and configuration', function () {
  it('stops with one line naming the key when a value is bad', function () {
    for (const [variable, value] of [
      ['PORT', 'abc'],
      ['POLICY_POLL_MIN_SECONDS', '0'],
      ['STORE_URL', 'mysql://x'],
      ['SERVICE_SOFTWARE_STATEMENT_VERIFY', 'maybe'],
    ] as const) {
      const { status, stderr } = start({ [variable]: value });
      expect(status, variable).to.equal(1);
      expect(stderr.split('\n'), variable).to.have.length(1);
      expect(stderr, variable).to.contain(variable);
      const line = JSON.parse(stderr);
      expect(line, `${variable}: a JSON log line, level fatal`).to.include({ level: 60 });
      expect(line.msg).to.match(/^Arbiter failed to start: invalid configuration: /);
      expect(line.err).to.include({
        type: 'ConfigError',
        message: line.msg.replace('Arbiter failed to start: ', ''),
      });
    }
  });

  it('names the environment variable, a list item by its position, and the allowed values', function () {
    const problem = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
        throw error;
      }
      return null;
    };
    const cases: [Record<string, string>, RegExp][] = [
      [
        { LOG_LEVEL: 'loud' },
        /^invalid configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent$/,
      ],
      [
        { TRUSTED_PROXIES: '10.0.0.0/8,proxy.internal' },
        /^invalid configuration: TRUSTED_PROXIES item 2 \("proxy.internal"\) must be an IP address or a CIDR range/,
      ],
      [{ TENANTS: 'acme,-bad' }, /^invalid configuration: TENANTS item 2 \("-bad"\) must be 1 to 64 letters/],
      [
        { STORE_URL: 'mysql://db' },
        /^invalid configuration: STORE_URL must be sqlite:<file>, sqlite::memory:, postgres:\/\/… \(postgresql:\/\/…\) or mongodb:\/\//,
      ],
      [
        { ISSUER: 'https://as.example/' },
        /^invalid configuration: ISSUER must be an http:\/\/ or https:\/\/ URL without/,
      ],
      [
        { SERVICE_SECRETS_KEY: 'short' },
        /^invalid configuration: SERVICE_SECRETS_KEY must be 32 random bytes in base64url/,
      ],
      [
        { AUTHORIZATION_CODE_TTL_SECONDS: '601' },
        /^invalid configuration: AUTHORIZATION_CODE_TTL_SECONDS must be <= 600$/,
      ],
    ];
    for (const [env, expected] of cases) {
      const message = problem(env);
      expect(message, JSON.stringify(env)).to.match(expected);
      // Internal keys never show: the operator sets variables.
      expect(message).not.to.match(/trustedProxies|storeUrl|tenants\.\d|ttl\./);
    }
    expect(problem({ SERVICE_SECRETS_KEY: 'short-secret-value' }), 'a secret value is never repeated').not.to.contain(
      'short-secret-value',
    );
  });

  it('stops with one line naming STORE_URL when its SQLite directory does not exist, and creates nothing', function () {
    const missing = join(tmpdir(), `arbiter-missing-${process.pid}-${Date.now()}`, 'nested');
    const { status, stderr } = start({ STORE_URL: `sqlite:${missing}/arbiter.db` });
    expect(status).to.equal(1);
    expect(stderr.split('\n')).to.have.length(1);
    expect(stderr).to.contain('STORE_URL').and.contain(missing).and.contain('not an existing directory');
    const line = JSON.parse(stderr);
    expect(line.level, 'a JSON log line, level fatal').to.equal(60);
    expect(line.err.message).to.contain('not an existing directory');
    expect(existsSync(dirname(missing)), 'no directory was made').to.equal(false);
  });

  it('warns at start-up when a production server has an http:// issuer, or no METRICS_TOKEN', async function () {
    this.timeout(60_000);
    const settings = { adminPort: null, metricsToken: null };
    expect(configWarnings({ ...settings, production: false, issuer: 'http://localhost:9000' })).to.deep.equal([]);
    expect(
      configWarnings({
        ...settings,
        production: true,
        issuer: 'https://as.example',
        metricsToken: 'metrics-token-0123456789',
      }),
    ).to.deep.equal([]);
    expect(configWarnings({ ...settings, production: true, issuer: 'https://as.example', adminPort: 9001 })[0])
      .to.contain('METRICS_TOKEN')
      .and.contain('the admin listener');
    const port = await freePort();
    const child = spawn(process.execPath, entryPoint('main'), {
      env: {
        PATH: process.env.PATH ?? '',
        NODE_ENV: 'production',
        STORE_URL: 'sqlite::memory:',
        PORT: String(port),
        ISSUER: `http://127.0.0.1:${port}`,
        SERVICE_ADMIN_API_KEY: 'production-admin-key-0123456789',
        SERVICE_SECRETS_KEY: randomBytes(32).toString('base64url'),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    try {
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status === 200,
        45_000,
      );
      const lines = stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { level: number; msg: string });
      const warnings = lines.filter((line) => line.msg.startsWith('ISSUER is http://'));
      expect(warnings, stdout).to.have.length(1);
      expect(warnings[0]!.level, 'pino warn').to.equal(40);
      expect(warnings[0]!.msg).to.contain('NODE_ENV=production').and.contain('https://');
      const metrics = lines.filter((line) => line.msg.startsWith('METRICS_TOKEN is not set'));
      expect(metrics, stdout).to.have.length(1);
      expect(metrics[0]!.level, 'pino warn').to.equal(40);
      expect(metrics[0]!.msg).to.contain('GET /metrics answers anyone');
      child.kill('SIGTERM');
      await once(child, 'exit');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('refuses to start in production without SERVICE_ADMIN_API_KEY, or without SERVICE_SECRETS_KEY', function () {
    const { status, stderr } = start({ NODE_ENV: 'production' });
    expect(status).to.equal(1);
    expect(stderr).to.contain('SERVICE_ADMIN_API_KEY');
    const withKey = start({ NODE_ENV: 'production', SERVICE_ADMIN_API_KEY: 'production-admin-key-0123456789' });
    expect(withKey.status).to.equal(1);
    expect(withKey.stderr).to.contain('SERVICE_SECRETS_KEY');
  });

  it('answers /healthz 200 when the store and the policy engine are ready', async function () {
    const server = await withServer();
    const response = await server.request('/healthz');
    expect(response.status).to.equal(200);
    const body = (await response.json()) as any;
    expect(body).to.include({ status: 'ok', store: 'up', policy: 'ready' });
    expect(body.policyRevision.store).to.match(/^[0-9a-f]{64}$/);
    expect(body.policyRevision.opa, 'OPA serves what the store holds').to.equal(body.policyRevision.store);
  });

  it('answers /healthz 503 while the policy engine cannot be reached', async function () {
    const server = await startTestServer({ OPA_URL: 'http://127.0.0.1:9' });
    try {
      const response = await server.request('/healthz');
      expect(response.status).to.equal(503);
      expect(((await response.json()) as any).policy).to.equal('not ready');
    } finally {
      await server.close();
    }
  });

  it('fails closed at the protocol endpoints while the policy engine cannot be reached: 503, audited as error', async function () {
    const server = await startTestServer({ OPA_URL: 'http://127.0.0.1:9' });
    try {
      const secret = await confidentialClient(server, 'blind-svc', { scopes: ['read'] });
      const { status, body } = await clientCredentials(server, 'blind-svc', secret, { scope: 'read' });
      expect(status).to.equal(503);
      expect(body.error).to.equal('temporarily_unavailable');
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect(entry).to.include({ outcome: 'error', clientId: 'blind-svc' });
      expect(entry.policyDecision.engineError).to.match(/unreachable/);
    } finally {
      await server.close();
    }
  });

  it('starts in development on sqlite::memory: with a generated Admin API key printed once, logs JSON only, and stops its OPA on SIGTERM', async function () {
    this.timeout(60_000);
    const port = await freePort();
    const child = spawn(process.execPath, entryPoint('main'), {
      env: { PATH: process.env.PATH ?? '', STORE_URL: 'sqlite::memory:', PORT: String(port), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    try {
      const deadline = Date.now() + 45_000;
      let healthy = false;
      while (!healthy && Date.now() < deadline) {
        healthy = (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status === 200;
        if (!healthy) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(healthy, 'the server became ready').to.equal(true);
      const probe = await fetch(`http://127.0.0.1:${port}/livez`, { headers: { 'X-Request-ID': 'startup-probe-1' } });
      expect(probe.status).to.equal(200);
      const accessLine = () =>
        jsonLines(stdout).find((line) => line.requestId === 'startup-probe-1' && line.msg === 'request');
      await eventually(async () => accessLine() !== undefined);
      expect(accessLine()).to.include({ component: 'access', method: 'GET', path: '/livez', status: 200 });
      const lines = jsonLines(stdout);
      expect(
        lines.filter((line) => /Bundle load failed/.test(JSON.stringify(line))),
        "OPA's first poll waits for the server instead of failing",
      ).to.deep.equal([]);
      expect(
        lines.filter((line) => JSON.stringify(line).match(/"component":"[^"]*"[^{}]*"component"/)),
        'no line names its component twice',
      ).to.deep.equal([]);
      const keys = lines
        .filter((line) => line.msg === 'Admin API key for this run (set SERVICE_ADMIN_API_KEY to choose one)')
        .map((line) => line.adminApiKey as string);
      expect(keys, 'printed exactly once').to.have.length(1);
      expect(
        (await fetch(`http://127.0.0.1:${port}/admin/api/clients`, { headers: { 'X-Admin-API-Key': keys[0] } })).status,
      ).to.equal(200);
      const discovery = (await (await fetch(`http://127.0.0.1:${port}/.well-known/openid-configuration`)).json()) as {
        issuer: string;
      };
      expect(discovery.issuer).to.equal(`http://localhost:${port}`);
      const opaPids = execFileSync('pgrep', ['-P', String(child.pid), '-f', 'run --server'], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map(Number);
      expect(opaPids, 'the managed OPA runs as a child').to.have.length(1);

      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      expect(code).to.equal(0);
      for (const pid of opaPids) expect(() => process.kill(pid, 0), `OPA ${pid} is stopped`).to.throw();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('answers the probes: /livez while the process runs, /readyz and /healthz as readiness', async function () {
    const server = await withServer();
    expect(await (await server.request('/livez')).json()).to.deep.equal({ status: 'alive' });
    for (const path of ['/readyz', '/healthz']) {
      const response = await server.request(path);
      expect(response.status, path).to.equal(200);
      expect(await response.json(), path).to.include({ status: 'ok', store: 'up', policy: 'ready' });
    }
    // GET and HEAD only (found 2026-11-30: any method was answered 200, after a readiness check's store write).
    expect((await server.request('/readyz', { method: 'HEAD' })).status).to.equal(200);
    for (const path of ['/livez', '/readyz', '/healthz'])
      for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS']) {
        const response = await server.request(path, { method });
        expect(response.status, `${method} ${path}`).to.equal(405);
        expect(response.headers.get('allow')).to.equal('GET, HEAD');
        await response.body?.cancel();
      }
  });

  it('answers unknown paths with a JSON 404, never a stack trace', async function () {
    const server = await withServer();
    const response = await server.request('/no/such/path');
    expect(response.status).to.equal(404);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    expect(await response.json()).to.include({ error: 'not_found' });
    const admin = await server.request('/admin/api/no-such-collection', { admin: true });
    expect(admin.status).to.equal(404);
    expect(await admin.json()).to.include({ error: 'not_found' });
    const anonymous = await server.request('/admin/api/no-such-collection');
    expect(anonymous.status, 'the key is checked before anything is said about the path').to.equal(401);
  });
});

/** Every line of a server's standard output, each of which must be a JSON object. */
function jsonLines(output: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`a line of the server's output is not JSON: ${line.slice(0, 200)}`);
      }
    });
}
