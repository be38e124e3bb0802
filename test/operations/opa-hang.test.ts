import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { basic, clientToken, confidentialClient, eventually, postForm } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/** The pids of this process's children running `opa run --server` (the managed OPA of an in-process test server). */
function opaChildren(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        // pid (comm) state ppid …: comm may hold spaces, so read after its closing parenthesis.
        const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (comm !== 'opa' || ppid !== process.pid) return [];
        // The managed `opa run --server`, not one of the short `opa check`/`opa build` runs.
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('--server') ? [Number(pid)] : [];
      } catch {
        return []; // gone meanwhile
      }
    });
}

/**
 * A hung OPA keeps its process and its port, so only asking it notices: the managed OPA's health
 * is checked every OPA_HEALTH_CHECK_INTERVAL_MS (2 s by default, 500 ms here so that the three
 * missed answers take seconds), and after three missed answers it is killed and restarted.
 * Meanwhile the in-process engine keeps deciding, and /readyz answers within a second every time.
 */
describe('A hung managed OPA', function () {
  this.timeout(120_000);
  let server: TestServer;
  /** The OPAs of the other servers this test process runs (shared fixtures): not this server's. */
  let others: Set<number>;
  const ours = () => opaChildren().filter((pid) => !others.has(pid));

  before(async function () {
    others = new Set(opaChildren());
    server = await readyServer({ OPA_HEALTH_CHECK_INTERVAL_MS: '500' });
  });
  after(async function () {
    await server?.close();
  });

  it('is detected and restarted, while tokens are still issued and /readyz answers within a second', async function () {
    const secret = await confidentialClient(server, 'hang-watch', { scopes: ['read'] });
    const token = () =>
      postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('hang-watch', secret) },
      );
    expect((await token()).status).to.equal(200);
    const before = ours();
    expect(before, 'one managed OPA').to.have.length(1);
    process.kill(before[0]!, 'SIGSTOP');
    try {
      let slowestProbeMs = 0;
      const notReady: number[] = [];
      const deadline = Date.now() + 40_000;
      for (;;) {
        const started = performance.now();
        const probe = await server.request('/readyz');
        await probe.body?.cancel();
        slowestProbeMs = Math.max(slowestProbeMs, performance.now() - started);
        if (probe.status !== 200) notReady.push(probe.status);
        expect((await token()).status, 'the in-process engine decides meanwhile').to.equal(200);
        const now = ours();
        if (now.length === 1 && now[0] !== before[0] && probe.status === 200) break;
        if (Date.now() > deadline) throw new Error(`OPA was not restarted: children ${JSON.stringify(now)}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(slowestProbeMs, 'every /readyz answered within about a second').to.be.below(2000);
      // Found 2026-11-29: it said 503 "not ready" while the in-process engine served every decision.
      expect(notReady, '/readyz says ready while the node serves').to.deep.equal([]);
    } finally {
      try {
        process.kill(before[0]!, 'SIGCONT');
      } catch {
        // killed by the watchdog, as it should be
      }
    }
  });
});

/**
 * With Rego decided by OPA alone (POLICY_REGO_IN_PROCESS=false), a hung OPA decides nothing: each
 * point answers 503 within POLICY_DECISION_TIMEOUT_MS, introspection too (found 2026-11-29: it
 * answered `active: false`, which a resource server takes for a dead token), logged as the policy
 * engine being unavailable, never as an unexpected error.
 */
describe('A hung OPA that decides alone', function () {
  this.timeout(120_000);
  let server: TestServer;
  let others: Set<number>;
  const logLines: string[] = [];
  const ours = () => opaChildren().filter((pid) => !others.has(pid));

  before(async function () {
    others = new Set(opaChildren());
    server = await readyServer(
      { POLICY_REGO_IN_PROCESS: 'false', POLICY_DECISION_TIMEOUT_MS: '1000', LOG_LEVEL: 'warn' },
      { logStream: { write: (line: string) => void logLines.push(line) } },
    );
  });
  after(async function () {
    await server?.close();
  });

  it('answers introspection and registration 503 temporarily_unavailable, and introspects the token active again once OPA answers', async function () {
    const appSecret = await confidentialClient(server, 'hang-app', { scopes: ['read'] });
    const rsSecret = await confidentialClient(server, 'hang-rs', { scopes: ['introspection'] });
    const token = await clientToken(server, 'hang-app', appSecret, { scope: 'read' });
    const caller = await clientToken(server, 'hang-rs', rsSecret, { scope: 'introspection' });
    const introspect = () => postForm(server, '/introspect', { token }, { Authorization: `Bearer ${caller}` });
    expect((await introspect()).body).to.include({ active: true });
    const [opa] = ours();
    process.kill(opa!, 'SIGSTOP');
    try {
      const during = await introspect();
      expect(during.status, JSON.stringify(during.body)).to.equal(503);
      expect(during.body.error).to.equal('temporarily_unavailable');
      expect(during.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
      const registered = await server.request('/register', {
        method: 'POST',
        json: { redirect_uris: ['https://app.example.test/cb'], token_endpoint_auth_method: 'none' },
      });
      expect(registered.status, await registered.text()).to.equal(503);
    } finally {
      process.kill(opa!, 'SIGCONT');
    }
    await eventually(async () => (await introspect()).body.active === true);
    const logged = logLines.map((line) => JSON.parse(line) as { msg: string });
    expect(logged.map((line) => line.msg)).to.include.members(['policy decision failed closed']);
    expect(logged.filter((line) => line.msg === 'unhandled error')).to.deep.equal([]);
    expect(logged.some((line) => line.msg.startsWith('policy engine unavailable: '))).to.equal(true);
  });
});
