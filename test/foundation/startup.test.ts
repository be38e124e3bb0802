import { spawnSync } from 'node:child_process';
import { expect } from 'chai';
import { sharedServer, startTestServer } from '../support/server.js';

/** Runs `tsx src/main.ts` with the given environment and returns how it ended. */
function start(env: Record<string, string>) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { PATH: process.env.PATH ?? '', STORE_URL: 'sqlite::memory:', ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, stderr: result.stderr.trim() };
}

describe('Start-up and configuration', function () {
  it('stops with one line naming the key when a value is bad', function () {
    for (const [variable, value] of [['PORT', 'abc'], ['POLICY_POLL_MIN_SECONDS', '0'], ['STORE_URL', 'postgres://x'], ['SERVICE_SOFTWARE_STATEMENT_VERIFY', 'maybe']]) {
      const { status, stderr } = start({ [variable]: value });
      expect(status, variable).to.equal(1);
      expect(stderr.split('\n'), variable).to.have.length(1);
      expect(stderr, variable).to.contain(variable);
    }
  });

  it('refuses to start in production without SERVICE_ADMIN_API_KEY', function () {
    const { status, stderr } = start({ NODE_ENV: 'production' });
    expect(status).to.equal(1);
    expect(stderr).to.contain('SERVICE_ADMIN_API_KEY');
  });

  it('answers /healthz 200 when the store and the policy engine are ready', async function () {
    const server = await sharedServer();
    const response = await server.request('/healthz');
    expect(response.status).to.equal(200);
    expect((await response.json()) as any).to.deep.equal({ status: 'ok', store: 'up', policy: 'ready' });
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

  it('answers unknown paths with a JSON 404, never a stack trace', async function () {
    const server = await sharedServer();
    const response = await server.request('/no/such/path');
    expect(response.status).to.equal(404);
    const text = await response.text();
    expect(text).not.to.match(/at \w+ \(/);
  });
});
