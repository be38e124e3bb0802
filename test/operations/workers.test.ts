import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { get as httpGet } from 'node:http';
import { expect } from 'chai';
import { basic, confidentialClient, eventually, FORM } from '../support/oauth.js';
import {
  connectionsToWorkers,
  startProcessServer,
  type ProcessServer,
  type WorkerConnection,
} from '../support/server-process.js';
import { entryPoint } from '../support/entry-point.js';
import { ADMIN_KEY } from '../support/server.js';

/**
 * WORKERS=2 (src/workers): one server as a primary and two worker processes sharing the port,
 * the SQLite file and the machine's one OPA. Each test reaches a given worker through a
 * kept-alive connection the primary handed to it (connectionsToWorkers). The single-use races
 * across workers are in test/oauth/single-use.test.ts, the drain on SIGTERM in
 * test/operations/audit-writer.test.ts (both run against one process and against WORKERS=2).
 */
describe('WORKERS=2: one server as two worker processes', function () {
  let server: ProcessServer;
  let workers: [WorkerConnection, WorkerConnection];

  before(async function () {
    this.timeout(120_000);
    // Its own server: it kills a worker. Info-level lines say what the primary compiled; a long keep-alive keeps connections with their worker.
    server = await startProcessServer({
      LOG_LEVEL: 'info',
      ACCESS_LOG: 'false',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000',
      WORKER_STANDBY: 'true',
    });
    const [first, second] = await connectionsToWorkers(server.url, 2);
    workers = [first!, second!];
    // The standby loads its code once every worker is up: timed tests begin after it, not beside it.
    await eventually(async () => (await workers[0].request('/healthz')).body.workers.standby === 'ready', 90_000);
  });

  after(async function () {
    for (const worker of workers ?? []) worker.close();
    await server?.close();
  });

  const health = async (worker: WorkerConnection) => (await worker.request('/healthz')).body;
  const logLines = () => jsonLines(server);
  const childrenOf = (pid: number, pattern: string) => {
    try {
      return execFileSync('pgrep', ['-P', String(pid), '-f', pattern], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map(Number);
    } catch {
      return []; // pgrep exits 1 when nothing matches
    }
  };
  const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);

  it('answers from two worker processes of one primary, and /healthz lists both', async function () {
    const [a, b] = workers;
    expect(a.pid).to.not.equal(b.pid);
    for (const worker of workers) {
      expect(parentOf(worker.pid), `worker ${worker.id}'s parent`).to.equal(server.process.pid);
      const body = await health(worker);
      expect(body.status).to.equal('ok');
      expect(body.workers.answeredBy).to.deep.equal({ id: worker.id, pid: worker.pid });
      expect(body.workers.configured).to.equal(2);
      expect(body.workers.up.map((up: { pid: number }) => up.pid).sort()).to.deep.equal([a.pid, b.pid].sort());
    }
  });

  it('runs one managed OPA for the machine, a child of the primary, and none in the workers', async function () {
    expect(childrenOf(server.process.pid!, 'run --server'), "the primary's OPA").to.have.length(1);
    for (const worker of workers)
      expect(childrenOf(worker.pid, 'run --server'), `worker ${worker.id}`).to.deep.equal([]);
  });

  it('puts a policy change in force on both workers within 1.5 s, its revision compiled to Wasm once', async function () {
    const secret = await confidentialClient(server, 'workers-svc', { scopes: ['read', 'write'] });
    const scopeFrom = async (worker: WorkerConnection) => {
      const answer = await worker.request('/token', {
        method: 'POST',
        headers: { ...FORM, authorization: basic('workers-svc', secret) },
        body: 'grant_type=client_credentials&scope=read%20write',
      });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      return answer.body.scope as string;
    };
    for (const worker of workers) expect(await scopeFrom(worker)).to.equal('read write');

    await changeOauthData(
      (data) => (data.clients = { ...data.clients, 'workers-svc': { withheld_scopes: ['write'] } }),
    );
    const savedAt = Date.now();
    const inForceAfter = await Promise.all(
      workers.map(async (worker) => {
        while ((await scopeFrom(worker)) !== 'read') {
          if (Date.now() - savedAt > 10_000) throw new Error(`worker ${worker.id} never applied the change`);
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        return Date.now() - savedAt;
      }),
    );
    for (const [index, ms] of inForceAfter.entries())
      expect(ms, `worker ${workers[index]!.id}: in force after ${ms} ms`).to.be.at.most(1500);

    // Both workers decide the new revision in process, from the one compilation the primary made.
    const revision = await inForceEverywhere();
    const compilations = logLines().filter(
      (line) => line.msg === 'policy revision compiled to Wasm once for every worker' && line.revision === revision,
    );
    expect(compilations, 'compilations of the new revision').to.have.length(1);
    expect(compilations[0]!.component).to.equal('primary');
  });

  /** Changes the default policy data entry `oauth` through the Admin API (any worker). */
  async function changeOauthData(change: (data: any) => void): Promise<void> {
    const entries = (await server.admin('GET', '/policy-data?bundledOnly=true')).body as any[];
    const data = JSON.parse(entries.find((entry) => entry.dataKey === 'oauth').payload);
    change(data);
    const saved = await server.admin('PUT', '/policy-data/by-key?dataKey=oauth', {
      dataKey: 'oauth',
      payload: JSON.stringify(data),
    });
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200);
  }

  /** Waits until OPA and both workers' in-process Rego decide the store's revision; that revision. */
  async function inForceEverywhere(): Promise<string> {
    let revision = '';
    await eventually(async () => {
      const seen = await Promise.all(workers.map(async (worker) => (await health(worker)).policyRevision));
      revision = seen[0].store;
      return seen.every((each) => each.store === revision && each.opa === revision && each.inProcess === revision);
    });
    return revision;
  }

  it('sums every worker on /metrics', async function () {
    const livez = async (worker: WorkerConnection) => {
      const text = (await worker.request('/metrics')).body as string;
      const line = text
        .split('\n')
        .find((each) => each.startsWith('arbiter_http_request_duration_seconds_count{endpoint="/livez"'));
      return { count: line ? Number(line.split(' ').pop()) : 0, text };
    };
    const before = (await livez(workers[0])).count;
    for (let n = 0; n < 3; n += 1) expect((await workers[0].request('/livez')).status).to.equal(200);
    for (let n = 0; n < 2; n += 1) expect((await workers[1].request('/livez')).status).to.equal(200);
    for (const worker of workers) {
      const { count, text } = await livez(worker);
      expect(count, `/metrics through worker ${worker.id}`).to.equal(before + 5);
      expect(text).to.match(/^arbiter_workers_up 2$/m);
      expect(text).to.match(/^arbiter_policy_revision_in_force\{[^}]*\} 1$/m);
    }
  });

  it('consumes a single-use initial access token once, and rotates a registration access token once, across workers', async function () {
    const [a, b] = workers;
    // Managing a registration (RFC 7592) is open registration's business, closed by default.
    await changeOauthData((data) => (data.public_client_policy.enabled = true));
    await inForceEverywhere();
    const register = (worker: WorkerConnection, token: string) =>
      worker.request('/register', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          redirect_uris: ['https://workers.example.test/cb'],
          grant_types: ['authorization_code'],
        }),
      });
    for (let round = 0; round < 5; round += 1) {
      const iat = await server.admin('POST', '/initial-access-tokens', { name: `workers-${round}`, uses: 1 });
      expect(iat.status, JSON.stringify(iat.body)).to.equal(201);
      const registered = await Promise.all([register(a, iat.body.token), register(b, iat.body.token)]);
      expect(registered.map((answer) => answer.status).sort(), `round ${round}`).to.deep.equal([201, 401]);
      const client = registered.find((answer) => answer.status === 201)!.body;
      const update = (worker: WorkerConnection, name: string) =>
        worker.request(`/register/${encodeURIComponent(client.client_id)}`, {
          method: 'PUT',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${client.registration_access_token}` },
          body: JSON.stringify({
            client_id: client.client_id,
            redirect_uris: ['https://workers.example.test/cb'],
            grant_types: ['authorization_code'],
            client_name: name,
          }),
        });
      const updated = await Promise.all([update(a, 'A'), update(b, 'B')]);
      expect(
        updated.map((answer) => answer.status).sort(),
        `round ${round}: ${JSON.stringify(updated.map((answer) => answer.body))}`,
      ).to.deep.equal([200, 401]);
    }
  });

  it('takes a rotated secret on both workers until its grace ends, then on neither: no cached check outlives it', async function () {
    // A typed secret (BCrypt): each worker remembers its successful check (src/oauth/clients/secrets.ts).
    const clientId = 'workers-rotated-svc';
    const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
    const token = async (worker: WorkerConnection, presented: string) =>
      (
        await worker.request('/token', {
          method: 'POST',
          headers: { ...FORM, authorization: basic(clientId, presented) },
          body: 'grant_type=client_credentials&scope=read',
        })
      ).status;
    for (const worker of workers) expect(await token(worker, secret), `worker ${worker.id}`).to.equal(200);
    const rotated = await server.admin('POST', `/clients/${clientId}/secret`, { graceSeconds: 2 });
    expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
    const fresh = rotated.body.generatedClientSecret as string;
    const until = Date.parse(rotated.body.previousSecretValidUntil);
    for (const worker of workers) {
      expect(await token(worker, secret), `the previous secret at worker ${worker.id}`).to.equal(200);
      expect(await token(worker, fresh), `the new secret at worker ${worker.id}`).to.equal(200);
    }
    await eventually(async () => (await token(workers[0], secret)) === 401, 15_000, 100);
    expect(Date.now(), 'not refused before the grace ends').to.be.at.least(until);
    expect(await token(workers[1], secret), 'the other worker refuses it too').to.equal(401);
    for (const worker of workers) expect(await token(worker, fresh), `worker ${worker.id}`).to.equal(200);
  });

  it('refuses at once, at both workers, a client switched off through one: each keeps its record only while no client changed', async function () {
    const clientId = 'workers-switched-off-svc';
    const secret = await confidentialClient(server, clientId, { scopes: ['read'] });
    const token = async (worker: WorkerConnection) =>
      (
        await worker.request('/token', {
          method: 'POST',
          headers: { ...FORM, authorization: basic(clientId, secret) },
          body: 'grant_type=client_credentials&scope=read',
        })
      ).status;
    // Asked twice, in separate turns: each worker holds the record from its first read (TurnReads).
    for (const worker of [...workers, ...workers]) expect(await token(worker), `worker ${worker.id}`).to.equal(200);
    const switchedOff = await workers[0].request(`/admin/api/clients/${clientId}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'x-admin-api-key': ADMIN_KEY },
      body: JSON.stringify({ clientId, clientType: 'confidential', scopes: ['read'], enabled: false }),
    });
    expect(switchedOff.status, JSON.stringify(switchedOff.body)).to.equal(200);
    expect(await token(workers[1]), 'the other worker, right after the answer').to.equal(401);
    expect(await token(workers[0]), 'the worker that wrote it').to.equal(401);
  });

  it('replaces a killed worker within 5 s by its loaded standby, and keeps answering meanwhile', async function () {
    this.timeout(120_000);
    const [victim, survivor] = workers;
    // A start is mostly loading code: the standby has loaded it (it neither listens nor opens the store).
    await eventually(async () => (await health(survivor)).workers.standby === 'ready', 90_000);
    const standbyPid = childrenOf(server.process.pid!, entryPoint('main').at(-1)!).find(
      (pid) => pid !== victim.pid && pid !== survivor.pid,
    );
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    // The primary learns of the death from the worker's IPC channel closing. A connection it hands
    // to the worker in that very instant dies with it (node:cluster's round robin): from then on,
    // every new connection goes to a worker that is up.
    const upNow = async () => (await health(survivor)).workers.up as { id: number; pid: number }[];
    await eventually(async () => !(await upNow()).some((worker) => worker.pid === victim.pid), 10_000, 20);
    // And while the standby takes the place: it listens before its app is built, and a connection the
    // primary hands it meanwhile waits for it (found 2026-11-29: answered 503 "the server is starting").
    let up: { id: number; pid: number }[] = [];
    let tookPlace = false;
    const statuses: number[] = [];
    const asking = (async () => {
      while (!tookPlace || statuses.length < 20) statuses.push(await onNewConnection('/livez'));
    })();
    await eventually(async () => (up = await upNow()).length === 2, 30_000, 20);
    tookPlace = true;
    await asking;
    expect(
      statuses.flatMap((status, n) => (status === 200 ? [] : [`request ${n} after the kill: ${status}`])),
      `of ${statuses.length} on new connections`,
    ).to.deep.equal([]);
    const replacedInMs = Date.now() - killedAt;
    expect(up.map((worker) => worker.pid))
      .to.include(survivor.pid)
      .and.not.include(victim.pid);
    const replacement = up.find((worker) => worker.pid !== survivor.pid)!;
    expect(replacement.pid, 'the standby took the place').to.equal(standbyPid);
    expect(parentOf(replacement.pid)).to.equal(server.process.pid!);
    // Was 8.6 to 10 s (a new worker loading its code); about 1 s with the standby, on a busy machine.
    expect(replacedInMs, 'from the kill to the replacement up').to.be.below(5_000);
    // A new replacement serves: on a connection of its own, until it is the one answering.
    await eventually(
      async () => {
        const answered = await fetch(`${server.url}/healthz`, { headers: { connection: 'close' } });
        return ((await answered.json()) as any).workers.answeredBy.pid === replacement.pid;
      },
      10_000,
      20,
    );
    const metrics = (await survivor.request('/metrics')).body as string;
    expect(
      metrics.split('\n').find((line) => line.startsWith('arbiter_worker_restarts_total')),
      server.output().slice(-3000),
    ).to.equal('arbiter_worker_restarts_total 1');
    expect(
      logLines().filter((line) => line.msg?.startsWith('a worker stopped unexpectedly')),
      'the death is logged',
    ).to.have.length(1);
    const replaced = logLines().filter((line) => line.msg === "a dead worker's replacement answers requests")[0]!;
    expect(replaced.msSinceDeath, 'logged with its delay').to.be.a('number').and.below(5_000);
    // And the next standby is forked, for the next death.
    await eventually(async () => (await health(survivor)).workers.standby !== 'none', 10_000);
  });

  /** GET on a connection of its own (so at any worker the primary picks); its status, or 0 when no answer came within 5 s. */
  const onNewConnection = (path: string) =>
    new Promise<number>((resolve) => {
      const outgoing = httpGet(`${server.url}${path}`, { agent: false, timeout: 5_000 }, (incoming) => {
        incoming.resume();
        incoming.on('end', () => resolve(incoming.statusCode ?? 0));
      });
      outgoing.on('timeout', () => outgoing.destroy());
      outgoing.on('error', () => resolve(0));
    });
});

describe('WORKERS=2: the auth-failure throttle counts across workers', function () {
  let server: ProcessServer;
  let workers: [WorkerConnection, WorkerConnection];

  before(async function () {
    this.timeout(120_000);
    // Its own server: a low failure limit.
    server = await startProcessServer({ AUTH_FAILURE_LIMIT: '4', HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000' });
    const [first, second] = await connectionsToWorkers(server.url, 2);
    workers = [first!, second!];
  });

  after(async function () {
    for (const worker of workers ?? []) worker.close();
    await server?.close();
  });

  it('refuses with 429, at either worker, a credential that failed the limit in all over both', async function () {
    await confidentialClient(server, 'throttled-svc', { scopes: ['read'] });
    const guess = (worker: WorkerConnection) =>
      worker.request('/token', {
        method: 'POST',
        headers: { ...FORM, authorization: basic('throttled-svc', 'a wrong guess') },
        body: 'grant_type=client_credentials&scope=read',
      });
    // Two failures at each worker: under the limit of 4 at either alone.
    for (const worker of [...workers, ...workers]) expect((await guess(worker)).status).to.equal(401);
    for (const worker of workers) expect((await guess(worker)).status, `worker ${worker.id}`).to.equal(429);
  });

  it('locks out, within a second, a credential another worker last saw succeed (an empty read of its counters is reused for a second at most)', async function () {
    const secret = await confidentialClient(server, 'seen-svc', { scopes: ['read'] });
    const [failing, succeeding] = workers;
    const token = (worker: WorkerConnection, clientSecret: string) =>
      worker.request('/token', {
        method: 'POST',
        headers: { ...FORM, authorization: basic('seen-svc', clientSecret) },
        body: 'grant_type=client_credentials&scope=read',
      });
    // This worker reads the (empty) counters of seen-svc and keeps that read.
    expect((await token(succeeding, secret)).status).to.equal(200);
    // Counted whether answered 401 or (the address failed before, in the test above) 429.
    for (let attempt = 0; attempt < 4; attempt++)
      expect([401, 429]).to.include((await token(failing, 'a wrong guess')).status);
    const lockedAt = Date.now();
    await eventually(async () => (await token(succeeding, secret)).status === 429, 5000);
    expect(Date.now() - lockedAt, 'seen by the other worker within about a second').to.be.below(3000);
    expect((await token(failing, secret)).status, 'and by the worker that counted the failures at once').to.equal(429);
  });
});

describe('WORKERS=2: a place whose new worker cannot be started', function () {
  let server: ProcessServer;
  let binDir: string;
  let node: string;

  before(async function () {
    this.timeout(120_000);
    // Its own node binary, removed while the server runs (as `npm ci` can remove the one under
    // node_modules/): a worker then cannot be started, which Node says with an 'error' and no 'exit'.
    binDir = mkdtempSync(join(tmpdir(), 'arbiter-node-'));
    node = join(binDir, 'node');
    copyFileSync(process.execPath, node);
    chmodSync(node, 0o755);
    server = await startProcessServer(
      { LOG_LEVEL: 'info', ACCESS_LOG: 'false', WORKER_STANDBY: 'false' },
      { execPath: node },
    );
  });
  after(async function () {
    await server?.close();
    rmSync(binDir, { recursive: true, force: true });
  });

  const upPids = async () => {
    const answer = await fetch(`${server.url}/healthz`, { headers: { connection: 'close' } });
    return (((await answer.json()) as any).workers.up as { pid: number }[]).map((worker) => worker.pid);
  };
  const logLines = () => jsonLines(server);

  it('says so, keeps answering with the other, and tries again with back-off until one starts', async function () {
    this.timeout(60_000);
    const [victim, survivor] = await upPids();
    rmSync(node);
    process.kill(victim!, 'SIGKILL');
    await eventually(
      async () => logLines().some((line) => /could not be started: spawn .* ENOENT/.test(line.reason ?? '')),
      20_000,
      50,
    );
    expect(await upPids(), 'the truth: one worker up').to.deep.equal([survivor]);
    expect(server.process.exitCode, 'the primary runs on').to.equal(null);
    copyFileSync(process.execPath, node);
    chmodSync(node, 0o755);
    // Was: the place kept the worker that never started, and was never filled again.
    await eventually(async () => (await upPids()).length === 2, 30_000, 100);
    const failed = logLines().filter((line) => /could not be started/.test(line.reason ?? ''));
    expect(failed[0]!.msg).to.equal('a worker stopped unexpectedly; the others answer until its replacement is up');
    expect(
      failed.map((line) => line.restartInMs),
      'tried again with back-off',
    ).to.satisfy((delays: number[]) => delays.every((delay, index) => index === 0 || delay > delays[index - 1]!));
  });
});

/** The JSON log lines a process server wrote so far. */
function jsonLines(server: ProcessServer): Record<string, any>[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, any>);
}

describe('WORKERS=2: a worker whose event loop stopped', function () {
  let server: ProcessServer;

  before(async function () {
    this.timeout(120_000);
    // Its own server: the least heartbeat timeout allowed, which no other test should run under, and
    // no standby (a replacement is a new fork, whose start the bound below allows for).
    server = await startProcessServer({
      LOG_LEVEL: 'info',
      ACCESS_LOG: 'false',
      WORKER_STANDBY: 'false',
      WORKER_HEARTBEAT_TIMEOUT_MS: '2000',
    });
  });
  after(async function () {
    await server?.close();
  });

  const upPids = async () => {
    const answer = await fetch(`${server.url}/healthz`, {
      headers: { connection: 'close' },
      signal: AbortSignal.timeout(2_000),
    });
    return (((await answer.json()) as any).workers.up as { pid: number }[]).map((worker) => worker.pid);
  };

  it('kills and replaces it (SIGSTOP), which the primary would otherwise count as up for ever', async function () {
    this.timeout(90_000);
    const [hung] = await upPids();
    process.kill(hung!, 'SIGSTOP');
    try {
      // Was: listed as up, and handed its share of new connections, as long as it stayed stopped.
      // A request the primary hands the stopped worker meanwhile times out: it is asked again.
      await eventually(
        async () => {
          const up = await upPids().catch(() => [] as number[]);
          return up.length === 2 && !up.includes(hung!);
        },
        60_000,
        100,
      );
    } finally {
      // Whatever happened: a stopped process is never left behind.
      if (isAlive(hung!)) process.kill(hung!, 'SIGKILL');
    }
    const silent = jsonLines(server).filter((line) => line.msg?.startsWith('a worker stopped answering its heartbeat'));
    expect(silent, 'the kill is logged, once').to.have.length(1);
    expect(silent[0]!.pid).to.equal(hung);
    expect(silent[0]!.silentMs, 'after WORKER_HEARTBEAT_TIMEOUT_MS of silence').to.be.at.least(2_000);
  });
});

/** Whether `pid` runs (a zombie does not). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0] !== 'Z';
  } catch {
    return false;
  }
}
